"""ai-edge-litert's CompiledModel with XNNPACK's weight cache (``compiled_signatures``, the default on LiteRT)
computes exactly what its Interpreter computes (the same XNNPACK kernels; tolerance 0: bit-identical), on every
test fixture, over a sequence of signatures that share the state and change the batch size; it refuses to run
a signature whose reported output shapes differ from the file's declared ones (buffers that could be too
small); and it keeps LiteRT's log lines off stderr."""

from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import fixture_model
from tflite_train import contract as C
from tflite_train.runtime import TrainableModel
from tflite_train.runtime.model import compiled_signatures
from tflite_train.runtime.model.compiled_signatures import CompiledSignatures, OutputShapeError, compiled_model_available

pytestmark = pytest.mark.skipif(not compiled_model_available(), reason="needs ai-edge-litert's CompiledModel API")
FIXTURES = ("byo_mobilenet_v2_32", "byo_mobilenet_v3_small_32", "byo_plain_cnn_23", "byo_rescaling_20",
            "lite0_meta_adam_64", "mbv2_adam_32", "mcunet_adam_35", "proxyless_sgd_33", "tiny_adam_33", "tiny_int8_33",
            "tiny_int8c_33", "tiny_nocache_17", "tiny_sgd_full_17")
"""Every exported test fixture (``tools.fixtures``)."""


def _run(model: TrainableModel) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    low, high = model.metadata[C.F_INPUT][C.F_RANGE]
    x = rng.uniform(low, high, (4,) + model.input_shape).astype(np.float32)
    labels = np.array([0, 1, 2, 0])
    model.set_head(rng.standard_normal((3, model.feature_dim)).astype(np.float32))
    out = {"infer1": model.infer(x[:1])[C.LOGITS], **{f"fisher {k}": v for k, v in model.fisher(x, labels).items()}}
    model.set_selection({n: np.arange(0, c, 2) for n, c in model.candidate_channels.items()})
    out.update({f"loss {i}": np.float32(model.train_step(x[i:i + 1], labels[i:i + 1])[C.LOSS]) for i in range(3)})
    out.update({"infer4": model.infer(x)[C.EMBEDDINGS], **{f"state {k}": v for k, v in model.get_state().items()}})
    model.reset_state()
    out["infer after reset"] = model.infer(x[:2])[C.EMBEDDINGS]
    return out


@pytest.mark.parametrize("name", FIXTURES)
def test_the_same_outputs_as_the_interpreter(name):
    cached = TrainableModel(fixture_model(name), runtime="ai_edge_litert.interpreter")  # the default: the cache
    plain = TrainableModel(fixture_model(name), runtime="ai_edge_litert.interpreter", weight_cache=False)
    assert isinstance(cached.interpreter, CompiledSignatures) and not isinstance(plain.interpreter, CompiledSignatures)
    assert cached.delegated
    got, want = _run(cached), _run(plain)
    assert got.keys() == want.keys()
    for key, value in want.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)


@pytest.mark.parametrize("host_output_bytes", [0, 2**62])
def test_outputs_in_fresh_arrays_or_kept_buffers(monkeypatch, host_output_bytes):
    """Every output written into fresh numpy arrays (threshold 0), or every output through kept LiteRT buffers:
    the same values as the Interpreter's, and arrays returned earlier are not overwritten by later calls."""
    monkeypatch.setattr(compiled_signatures, "HOST_OUTPUT_BYTES", host_output_bytes)
    cached = TrainableModel(fixture_model("tiny_adam_33"), runtime="ai_edge_litert.interpreter")
    plain = TrainableModel(fixture_model("tiny_adam_33"), runtime="ai_edge_litert.interpreter", weight_cache=False)
    got, want = _run(cached), _run(plain)
    for key, value in want.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)
    first = cached.infer(np.zeros((2,) + cached.input_shape, np.float32))[C.LOGITS]
    kept = first.copy()
    cached.infer(np.ones((2,) + cached.input_shape, np.float32))
    np.testing.assert_array_equal(first, kept)


def test_a_signature_whose_reported_output_shapes_differ_is_not_run():
    """The file declares infer's logits [-1, K]; told they are [-1, K + 1], the runner refuses every batch size
    (the buffers it would size from LiteRT's report could be too small) before writing or running anything."""
    model = TrainableModel(fixture_model("tiny_adam_33"), runtime="ai_edge_litert.interpreter")
    compiled = model.interpreter
    shape, dtype = compiled.declared_shapes[C.INFER][C.F_OUTPUTS][C.LOGITS]
    compiled.declared_shapes[C.INFER][C.F_OUTPUTS][C.LOGITS] = ((shape[0], shape[1] + 1), dtype)
    x = np.zeros((3,) + model.input_shape, np.float32)
    for rows in (1, 3):
        with pytest.raises(OutputShapeError, match=r"'logits': \(%d, %d\)" % (rows, shape[1] + 1)):
            model.infer(x[:rows])
    compiled.declared_shapes[C.INFER][C.F_OUTPUTS][C.LOGITS] = (shape, dtype)
    assert model.infer(x)[C.LOGITS].shape == (3, shape[1])  # nothing was left half-prepared


def test_nothing_reaches_stderr(capfd):
    """LiteRT logs at creation, at the first buffer write, at every run of a signature with a constant output
    (the setters' ``ok``) and when the model is released; all of it is muted, the other runs are not."""
    model = TrainableModel(fixture_model("tiny_adam_33"), runtime="ai_edge_litert.interpreter", weight_cache=True)
    outputs = model.interpreter.constant_outputs
    assert outputs[C.SET_HEAD] == {C.OK} and outputs[C.RESET_STATE] == {C.OK} and not outputs[C.INFER]
    model.set_head(np.ones((2, model.feature_dim), np.float32))
    model.infer(np.zeros((1,) + model.input_shape, np.float32))
    del model
    assert capfd.readouterr().err == ""


def test_an_unknown_signature_is_refused():
    model = TrainableModel(fixture_model("tiny_adam_33"), runtime="ai_edge_litert.interpreter", weight_cache=True)
    with pytest.raises(ValueError, match="nope"):
        model.interpreter.get_signature_runner("nope")
    with pytest.raises(ValueError, match="takes inputs"):
        model.interpreter.get_signature_runner(C.INFER)(wrong=np.zeros(1, np.float32))
