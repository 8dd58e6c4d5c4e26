"""``converters.transposed_initial_values``: a variable whose initial value is a permutation of the
forward op's constant filter is initialised from that constant (one stored copy), with its exact values.

A one-conv and a one-dense module (Keras-layout variables, forward on the same numbers as constants,
the copy-on-write layout of ``converters.copy_on_write``) are converted with TF's converter, then
rewritten; the golden is the numpy value the variable was created from (bit-exact: TRANSPOSE copies).
"""

from __future__ import annotations


import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
from tensorflow.lite.python import schema_py_generated as schema

from tflite_train.converters.export import convert_saved_module
from tflite_train.converters.flatbuffer_rewrite import read_model, write_model
from tflite_train.converters.transposed_initial_values import transpose_initial_values_in


def _convert(kernel: np.ndarray, rank: int) -> bytes:
    module = tf.Module()
    module.v = tf.Variable(kernel, trainable=False)
    spec = tf.TensorSpec([1, 3, 3, kernel.shape[-2]] if rank == 4 else [2, kernel.shape[0]], tf.float32, name="x")

    @tf.function(input_signature=[spec])
    def infer(x):
        k = tf.constant(kernel)
        return {"y": tf.nn.conv2d(x, k, 1, "SAME") if rank == 4 else tf.matmul(x, k)}

    @tf.function(input_signature=[tf.TensorSpec([1], tf.int32, name="dummy")])
    def read(dummy):  # noqa: ARG001
        return {"v": tf.identity(module.v)}

    @tf.function(input_signature=[tf.TensorSpec(kernel.shape, tf.float32, name="value")])
    def write(value):
        module.v.assign(value)
        return {"ok": tf.constant(1)}

    return convert_saved_module(module, {"infer": infer, "read": read, "write": write})


def _rewrite(raw: bytes) -> tuple[bytes, bool]:
    obj = read_model(raw)
    changed = transpose_initial_values_in(obj)
    return write_model(obj, len(raw)), changed


def _stored_bytes(raw: bytes) -> int:
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(raw, 0))
    return sum(len(b.data) for b in model.buffers if b.data is not None)


@pytest.mark.parametrize("shape", [(3, 3, 8, 16), (1, 1, 24, 40), (24, 40)])
def test_initial_value_is_transposed_from_the_forward_constant(shape):
    kernel = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    raw = _convert(kernel, len(shape))
    assert _stored_bytes(raw) >= 2 * kernel.nbytes  # the converter stores both layouts
    out, changed = _rewrite(raw)
    assert changed
    assert _stored_bytes(out) < _stored_bytes(raw) - kernel.nbytes + 1024  # one layout dropped
    assert kernel.tobytes() not in out
    interpreter = Interpreter(model_content=out)
    np.testing.assert_array_equal(interpreter.get_signature_runner("read")(dummy=np.zeros([1], np.int32))["v"], kernel)
    x = np.random.default_rng(1).standard_normal(interpreter.get_signature_runner("infer").get_input_details()["x"]
                                                 ["shape"]).astype(np.float32)
    expected = tf.nn.conv2d(x, kernel, 1, "SAME") if len(shape) == 4 else x @ kernel
    np.testing.assert_allclose(interpreter.get_signature_runner("infer")(x=x)["y"], expected, rtol=1e-5, atol=1e-5)


def test_unrelated_initial_values_are_kept():
    """A variable whose value is no permutation of a stored constant keeps its own buffer."""
    kernel = np.random.default_rng(0).standard_normal((1, 1, 8, 16)).astype(np.float32)
    module = tf.Module()
    module.v = tf.Variable(kernel + 1.0, trainable=False)

    @tf.function(input_signature=[tf.TensorSpec([1, 3, 3, 8], tf.float32, name="x")])
    def infer(x):
        return {"y": tf.nn.conv2d(x, tf.constant(kernel), 1, "SAME") + tf.reduce_sum(module.v)}

    @tf.function(input_signature=[tf.TensorSpec(kernel.shape, tf.float32, name="value")])
    def write(value):
        module.v.assign(value)
        return {"ok": tf.constant(1)}

    raw = convert_saved_module(module, {"infer": infer, "write": write})
    out, changed = _rewrite(raw)
    assert not changed
    assert (kernel + 1.0).tobytes() in out
