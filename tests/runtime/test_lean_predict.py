"""``predict`` opens only what classifying needs: the inference-only model of ``adapted_constants``.

The guard: ``run_prediction`` builds one model, which opens ``infer`` and ``set_head`` only and calls
nothing else; a signature left out is refused. Parity: its logits against the whole model restored through
the contract (``restore_checkpoint``: the selected layers then run their variable path, which computes the
same convolution as another op; tolerance 1e-5 of the largest logit). A file the edit cannot read (an
int8-candidates export: its candidate constants are int8) is restored through the contract instead, with
the same predictions, and so is one whose patched constant another layer also reads (the tiny fixtures'
zero biases share one buffer).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import episode_arrays, fixture_model, relative_error, write_episode_folders
from tflite_train import contract as C
from tflite_train.runtime import AdaptConfig, TrainableModel, adapt
from tflite_train.runtime.adapt_job import open_adapted, run_prediction
from tflite_train.runtime.checkpoint.checkpoint import CheckpointError, load_checkpoint, restore_checkpoint, save_checkpoint
from tflite_train.runtime.model import interpreter
from tflite_train.runtime.model.adapted_constants import INFERENCE_SIGNATURES, ConstantLayoutError, adapted_constants_edit

pytestmark = pytest.mark.pi

CONFIG = AdaptConfig(policy="tinytrain", memory_bytes=float(2**20), compute_fraction=0.5, iterations=4)


def _checkpoint(fashion, tmp_path, name, include_optimizer=False):
    model = TrainableModel(fixture_model(name))
    xs, ys, xq, _ = episode_arrays(fashion, model.input_shape, ways=3, shots=3, queries=4, seed=5)
    result = adapt(model, xs, ys, CONFIG)
    assert result.selection.layers, "the test needs a selection to write"
    path = tmp_path / f"{name}.ckpt"
    save_checkpoint(path, model, result.selection, include_optimizer=include_optimizer, class_names=("a", "b", "c"))
    return path, xq


@pytest.fixture()
def opened(monkeypatch):
    """Every TrainableModel built in the test, with the signatures it called."""
    models: list[tuple[TrainableModel, list[str]]] = []
    init, call = TrainableModel.__init__, TrainableModel.call

    def spy_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        models.append((self, []))

    def spy_call(self, signature, **inputs):
        next(calls for model, calls in models if model is self).append(signature)
        return call(self, signature, **inputs)

    monkeypatch.setattr(interpreter.TrainableModel, "__init__", spy_init)
    monkeypatch.setattr(interpreter.TrainableModel, "call", spy_call)
    return models


def test_predict_opens_and_calls_only_infer_and_set_head(fashion, tmp_path, opened):
    path, _ = _checkpoint(fashion, tmp_path, "mcunet_adam_35")
    _, query = write_episode_folders(fashion, tmp_path / "data", ways=3, shots=1, queries=2, seed=1)
    opened.clear()
    rows = run_prediction(fixture_model("mcunet_adam_35"), path, sorted(query.glob("*/*")))
    assert len(rows) == 6 and {row[2] for row in rows} <= {"a", "b", "c"}
    assert len(opened) == 1, "predict built more than one model"
    model, calls = opened[0]
    assert model.signatures == set(INFERENCE_SIGNATURES)
    assert set(calls) <= set(INFERENCE_SIGNATURES), f"predict called {sorted(set(calls))}"
    with pytest.raises(ValueError, match="was not opened"):
        model.get_state()


@pytest.mark.parametrize("name,include_optimizer", [("mcunet_adam_35", False), ("lite0_meta_adam_64", True)])
def test_inference_model_classifies_as_the_restored_model(fashion, tmp_path, name, include_optimizer):
    path, xq = _checkpoint(fashion, tmp_path, name, include_optimizer)
    checkpoint = load_checkpoint(path)
    lean, _ = open_adapted(fixture_model(name), checkpoint)
    assert lean.signatures == set(INFERENCE_SIGNATURES) and lean.num_classes == 3
    full = TrainableModel(fixture_model(name))
    restore_checkpoint(full, checkpoint)
    got, want = lean.infer(xq), full.infer(xq)
    assert relative_error(got[C.LOGITS][:, :3], want[C.LOGITS][:, :3]) < 1e-5
    assert relative_error(got[C.EMBEDDINGS], want[C.EMBEDDINGS]) < 1e-5
    np.testing.assert_array_equal(np.argmax(got[C.LOGITS][:, :3], 1), np.argmax(want[C.LOGITS][:, :3], 1))


@pytest.mark.parametrize("name,reason", [("tiny_int8c_33", "not one CONV_2D"), ("tiny_adam_33", "also read by")])
def test_a_file_the_edit_cannot_read_is_restored_through_the_contract(fashion, tmp_path, name, reason):
    path, xq = _checkpoint(fashion, tmp_path, name)
    checkpoint = load_checkpoint(path)
    with pytest.raises(ConstantLayoutError, match=reason):
        TrainableModel(fixture_model(name), signatures=INFERENCE_SIGNATURES, edit=adapted_constants_edit(checkpoint))
    model, _ = open_adapted(fixture_model(name), checkpoint)
    assert model.signatures is None
    full = TrainableModel(fixture_model(name))
    restore_checkpoint(full, checkpoint)
    # the command's model runs one image a call (adapt_job.COMMAND_MAX_ROWS), the other the whole batch: an
    # int8 export's kernels round the batch-1 path differently (2e-7 relative measured)
    got, want = model.infer(xq)[C.LOGITS][:, :3], full.infer(xq)[C.LOGITS][:, :3]
    assert relative_error(got, want) < 1e-5
    np.testing.assert_array_equal(np.argmax(got, 1), np.argmax(want, 1))


def test_a_checkpoint_of_another_model_is_refused_before_any_interpreter(fashion, tmp_path, opened):
    path, _ = _checkpoint(fashion, tmp_path, "tiny_adam_33")
    opened.clear()
    with pytest.raises(CheckpointError, match="not this model"):
        open_adapted(fixture_model("tiny_sgd_full_17"), load_checkpoint(path))
    assert not opened
