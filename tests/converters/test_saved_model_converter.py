"""``converters.saved_model_converter``: the same flatbuffer as TensorFlow's public
``TFLiteConverter.from_saved_model`` (same flags, its conversion metadata excluded), byte for byte,
without restoring the SavedModel; and the public path when the fast class is unavailable."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.lite.python import lite

from tflite_train.converters.saved_model_converter import saved_model_converter
import tflite_train.converters.saved_model_converter as smc


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[str, list[str]]:
    """A SavedModel with a resource variable, a tf.cond (IF subgraphs) and three signatures."""
    path = str(tmp_path_factory.mktemp("saved"))
    module = tf.Module()
    module.w = tf.Variable(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
    def infer(x):
        y = tf.matmul(x, module.w)
        return {"y": tf.cond(tf.reduce_sum(y) > 0, lambda: tf.nn.relu6(y), lambda: y * 0.5)}

    @tf.function(input_signature=[tf.TensorSpec([4, 3], tf.float32, name="value")])
    def write(value):
        module.w.assign(value)
        return {"ok": tf.constant(1)}

    @tf.function(input_signature=[tf.TensorSpec([1], tf.int32, name="dummy")])
    def read(dummy):  # noqa: ARG001
        return {"w": tf.identity(module.w)}

    signatures = {"infer": infer, "write": write, "read": read}
    tf.saved_model.save(module, path, signatures=signatures)
    return path, list(signatures)


def _convert(converter) -> bytes:
    converter.experimental_enable_resource_variables = True
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


def _public(path: str) -> bytes:
    converter = tf.lite.TFLiteConverter.from_saved_model(path)
    converter.exclude_conversion_metadata = True
    return _convert(converter)


def test_same_flatbuffer_as_the_public_converter_without_restoring(saved, monkeypatch):
    path, keys = saved
    public = _public(path)

    def no_restore(*args, **kwargs):
        raise AssertionError("the SavedModel was restored")

    monkeypatch.setattr(lite, "_load", no_restore)
    fast = _convert(saved_model_converter(path, keys))
    assert fast == public
    runner = tf.lite.Interpreter(model_content=fast).get_signature_runner("infer")
    x = np.ones((2, 4), np.float32)
    w = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(runner(x=x)["y"], np.clip(x @ w, 0, 6) if (x @ w).sum() > 0 else 0.5 * x @ w,
                               rtol=1e-6)


def test_without_the_fast_class_the_public_path_gives_the_same_file(saved, monkeypatch, caplog):
    path, keys = saved
    monkeypatch.setattr(smc, "_FAST", None)
    with caplog.at_level("INFO", logger=smc.__name__):
        converter = saved_model_converter(path, keys)
    assert "from_saved_model" in caplog.text and converter.exclude_conversion_metadata
    assert _convert(converter) == _public(path)
    with pytest.raises(ValueError, match="signature_keys"):
        saved_model_converter(path, [])
