"""Copy-on-write forward of the candidate layers (``converters.copy_on_write``): a layer runs on its
exported constants until a train step (or ``set_state`` with other weights) changes it, then on its
variables; ``reset_state`` and ``set_state`` with the exported weights switch it back.

References (``tools.parity_reference``, ``.parity.npz``): ``infer`` = the Keras model + cosine head;
``infer_after_steps`` = the module's forward (TF) on the weights after the 3 reference train steps.
Tolerances (max |tflite - reference| / max |reference|): 5e-4 for the exported weights (as
``test_signature_parity``); 2e-3 after the steps (the weights themselves match to 2e-3,
``test_signature_parity``). Switching paths inside one runtime is checked exactly where both sides run
the same path, and by a change far above rounding where they must differ.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import parity_model, relative_error

FIXTURES = ["tiny_adam_33", "tiny_sgd_full_17", "mcunet_adam_35", "lite0_meta_adam_64", "byo_mobilenet_v3_small_32",
            "byo_plain_cnn_23"]
TOL_EXPORTED, TOL_AFTER_STEPS = 5e-4, 2e-3


_rel = relative_error


@pytest.fixture(scope="module", params=FIXTURES)
def case(request):
    return parity_model(request.param)


def _infer(model, ref):
    out = model.infer(ref["images"])
    return out["embeddings"], out["logits"][:, : int(ref["num_classes"])]


def test_infer_after_train_steps_matches_the_forward_on_the_updated_weights(case):
    model, ref = case
    initial = model.get_state()
    model.set_selection(ref["channel_mask"])
    for _ in range(sum(1 for key in ref if key.startswith("train_step/"))):
        model.train_step(ref["images"], ref["labels"])
    emb, logits = _infer(model, ref)
    assert _rel(emb, ref["infer_after_steps/embeddings"]) < TOL_AFTER_STEPS
    assert _rel(logits, ref["infer_after_steps/logits"]) < TOL_AFTER_STEPS
    assert _rel(emb, ref["infer/embeddings"]) > 10 * TOL_AFTER_STEPS  # the steps changed the forward
    trained = model.get_state()

    model.reset_state()  # back to the constant path: the exported forward
    model.set_head(ref["prototypes"][: int(ref["num_classes"])])
    clean_emb, clean_logits = _infer(model, ref)
    assert _rel(clean_emb, ref["infer/embeddings"]) < TOL_EXPORTED
    assert _rel(clean_logits, ref["infer/logits"]) < TOL_EXPORTED

    model.set_state(trained)  # the trained weights again: the variable path of the changed layers
    np.testing.assert_array_equal(_infer(model, ref)[0], emb)
    model.set_state(initial)  # the exported weights: every layer back on its constants
    np.testing.assert_array_equal(_infer(model, ref)[0], clean_emb)
    model.reset_state()


def test_set_state_with_one_changed_channel_leaves_the_constant_path(case):
    """A restored state that differs from the export in one output channel's kernel, or in one bias
    value, of one layer is used (a single kernel weight may sit on a dead input channel)."""
    model, ref = case
    model.reset_state()
    model.set_head(ref["prototypes"][: int(ref["num_classes"])])
    clean_emb, _ = _infer(model, ref)
    state = model.get_state()
    for layer in (model.candidates[0], model.candidates[-1]):
        for param in ("kernel", "bias"):
            changed = {name: value.copy() for name, value in state.items()}
            value = changed[f"{layer}_{param}"]
            channels = value.shape[2] if value.ndim == 4 and value.shape[-1] == 1 else value.shape[-1]  # depthwise
            view = value.reshape(-1, channels, 1) if value.ndim == 4 and value.shape[-1] == 1 else \
                value.reshape(-1, channels)
            c = int(np.argmax(np.abs(view).sum(axis=0).reshape(-1)))
            # The channel with the largest weights may be dead on these images (pre-activation < 0 after
            # ReLU6: the meta-trained Lite0's final layer has 90 % zero embeddings); -100 x its kernel turns
            # z = w.x + b into z - 101 w.x, which wakes it, where -3 x moved the embedding by only 3e-3.
            view[:, c] = -3.0 * view[:, c] + 1.0 if param == "bias" else -100.0 * view[:, c]
            model.set_state(changed)
            assert _rel(_infer(model, ref)[0], clean_emb) > 10 * TOL_EXPORTED, (layer, param)
            model.set_state(state)
            np.testing.assert_array_equal(_infer(model, ref)[0], clean_emb)
    model.reset_state()
