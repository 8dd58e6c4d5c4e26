"""``export --quantize int8`` (issue 27, ``docs/int8.md``) on the tiny backbone at 32 px.

One export (module scope, synthetic calibration images) is read back from the flatbuffer
(``converters.flatbuffer_rewrite.read_model``: the schema's object API) and run on LiteRT:

* the frozen prefix's convolutions are int8 kernels in every signature that runs them, the candidate
  layers' convolutions float32;
* every state variable is written float32 (int32 ``num_classes``) by ``reset_state``;
* the candidate kernels are stored once as int8 with one scale per output channel, and the state after
  ``reset_state`` equals those int8 values times their scales, bit for bit;
* the embedded self-test passes with its stored tolerances.

Also: a Keras model exported ``int8``; ``int8-weights`` (its own export); ``int8-candidates`` on the fixture
``tiny_int8c_33`` and through ``tflite-train export --keras-model ... --quantize int8-candidates``;
``--calibration`` refused in one line without ``--quantize int8``.
"""

from __future__ import annotations

import collections
import os
import pathlib

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter
from tensorflow.lite.python import schema_py_generated as schema

from tflite_train import contract as C
from tflite_train.converters.export import export_model
from tflite_train.converters.export_config import ExportConfig
from tflite_train.converters.flatbuffer_rewrite import read_model, share_quantization_tables, write_model
from tflite_train.converters.int8_weights import dequantized, int8_kernel
from tflite_train.runtime import read_metadata
from tflite_train.runtime.model.selftest import verify

pytestmark = pytest.mark.slow

FIXTURE_DIR = pathlib.Path(os.environ.get("TFLITE_TRAIN_TEST_MODELS",
                                          pathlib.Path(__file__).resolve().parents[2] / "build" / "test-models"))
"""The exported test models (``python -m tools.fixtures``), as ``tests/runtime`` reads them."""

CONFIG = ExportConfig(backbone="tiny", input_size=(32, 32), candidate_blocks=2, class_capacity=4, train_variants=0,
                      cache_cuts=1, quantize="int8", calibration="synthetic:16")
CONV_OPS = {schema.BuiltinOperator.CONV_2D, schema.BuiltinOperator.DEPTHWISE_CONV_2D,
            schema.BuiltinOperator.FULLY_CONNECTED}


@pytest.fixture(scope="module")
def exported():
    return export_model(CONFIG)


def _op_name(model: schema.ModelT, op: schema.OperatorT) -> int:
    code = model.operatorCodes[op.opcodeIndex]
    return max(code.builtinCode, code.deprecatedBuiltinCode)


def _signature_subgraph(model: schema.ModelT, name: str) -> schema.SubGraphT:
    (index,) = [s.subgraphIndex for s in model.signatureDefs if s.signatureKey.decode() == name]
    return model.subgraphs[index]


def _conv_types(model: schema.ModelT, subgraph: schema.SubGraphT) -> collections.Counter:
    """Count of (op, input dtype) over the convolutions of one subgraph (IF branches not entered)."""
    return collections.Counter(subgraph.tensors[op.inputs[0]].type for op in subgraph.operators
                               if _op_name(model, op) in CONV_OPS)


def test_prefix_runs_int8_in_every_signature_that_runs_it(exported):
    model = read_model(exported.model)
    module = exported.module
    prefix_weighted = [n for n in module.graph.weighted() if n.name in module.int8_prefix.nodes]
    assert prefix_weighted, "the tiny backbone has frozen layers below its candidates"
    signatures = [C.INFER, C.FISHER, C.TRAIN_STEP, *(C.features_name(c.layer) for c in module.cache_cuts)]
    for name in signatures:
        types = _conv_types(model, _signature_subgraph(model, name))
        assert types[schema.TensorType.INT8] == len(prefix_weighted), (name, types)
        ops = {_op_name(model, op) for op in _signature_subgraph(model, name).operators}
        assert schema.BuiltinOperator.QUANTIZE in ops and schema.BuiltinOperator.DEQUANTIZE in ops, name


def test_everything_above_the_prefix_is_float32(exported):
    model = read_model(exported.model)
    for name in (C.TRAIN_STEP, C.infer_from_name(exported.module.cache_cuts[0].layer)):
        subgraph = _signature_subgraph(model, name)
        quantized = [op for op in subgraph.operators if _op_name(model, op) not in (schema.BuiltinOperator.QUANTIZE,)
                     and any(subgraph.tensors[i].type == schema.TensorType.INT8 for i in op.outputs)]
        assert len(quantized) <= len(exported.module.int8_prefix.nodes), name
    from_cut = _signature_subgraph(model, C.infer_from_name(exported.module.cache_cuts[0].layer))
    assert not _conv_types(model, from_cut)[schema.TensorType.INT8]


def test_state_variables_are_float32(exported):
    model = read_model(exported.model)
    reset = _signature_subgraph(model, C.RESET_STATE)
    written = [reset.tensors[op.inputs[1]].type for op in reset.operators
               if _op_name(model, op) == schema.BuiltinOperator.ASSIGN_VARIABLE]
    assert len(written) >= len(exported.module.names)
    assert set(written) <= {schema.TensorType.FLOAT32, schema.TensorType.INT32}
    state = Interpreter(model_content=exported.model).get_signature_runner(C.GET_STATE)(dummy=np.array(0, np.int32))
    assert {n: v.dtype for n, v in state.items() if v.dtype != np.float32} == {C.NUM_CLASSES: np.int32}


def _keras_layout(value: np.ndarray, axis: int, shape: tuple[int, ...]) -> np.ndarray | None:
    """A dequantized stored kernel in the variable's (Keras) layout ``shape``: as stored, or from the forward
    op's filter layout (CONV_2D OHWI, DEPTHWISE_CONV_2D [1, kh, kw, C], FULLY_CONNECTED [D_out, D_in])."""
    if value.shape == shape:
        return value
    if value.ndim == 4 and axis == 0:
        value = np.transpose(value, (1, 2, 3, 0))
    elif value.ndim == 4 and value.shape[0] == 1:
        value = value.reshape(*value.shape[1:], 1)
    elif value.ndim == 2:
        value = value.T
    return value if value.shape == shape else None


def _stored_int8_kernels(model: schema.ModelT) -> list[tuple[np.ndarray, int, int]]:
    """(dequantized value, channel count, quantized axis) of every per-channel int8 constant read by a DEQUANTIZE,
    computed from the file's int8 bytes and scales."""
    out = []
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            if _op_name(model, op) != schema.BuiltinOperator.DEQUANTIZE:
                continue
            tensor = subgraph.tensors[op.inputs[0]]
            data = model.buffers[tensor.buffer].data
            if tensor.type != schema.TensorType.INT8 or data is None or tensor.quantization is None:
                continue
            values = np.frombuffer(np.asarray(data, np.uint8).tobytes(), np.int8).reshape(tuple(tensor.shape))
            scales = np.asarray(tensor.quantization.scale, np.float32)
            axis = int(tensor.quantization.quantizedDimension)
            shape = [1] * values.ndim
            shape[axis] = -1
            out.append((values.astype(np.float32) * scales.reshape(shape), len(scales), axis))
    return out


def test_candidate_kernels_are_stored_int8_and_reset_state_dequantizes_them(exported):
    module = exported.module
    model = read_model(exported.model)
    stored = _stored_int8_kernels(model)
    interpreter = Interpreter(model_content=exported.model)
    interpreter.get_signature_runner(C.RESET_STATE)(dummy=np.array(0, np.int32))
    state = interpreter.get_signature_runner(C.GET_STATE)(dummy=np.array(0, np.int32))
    for name in module.candidate_names:
        kernel = state[name + C.KERNEL_SUFFIX]
        assert kernel.dtype == np.float32
        matches = [channels for value, channels, axis in stored
                   if channels == value.shape[axis] > 1
                   and np.array_equal(_keras_layout(value, axis, kernel.shape), kernel)]
        assert matches, f"{name}: the state after reset_state is no stored int8 kernel times its per-channel scales"
        np.testing.assert_array_equal(kernel, module.int8_kernels[name].dequantize(), err_msg=name)
    stored_bytes = {np.asarray(b.data, np.uint8).tobytes() for b in model.buffers if b.data is not None}
    for name, kernel in module.int8_kernels.items():  # no float32 copy left, in either layout
        value = kernel.dequantize()
        layouts = [value, np.transpose(value, (3, 0, 1, 2)) if value.ndim == 4 else value.T]
        assert not any(np.ascontiguousarray(v).tobytes() in stored_bytes for v in layouts), name


def test_selftest_passes_on_litert(exported):
    result = verify(exported.model, runtime="litert")
    assert result.passed, result.format()


def test_quantization_is_per_channel_and_symmetric():
    kernel = np.random.default_rng(0).standard_normal((3, 3, 4, 5)).astype(np.float32)
    kernel[..., 2] *= 100.0
    stored = int8_kernel(kernel)
    assert stored.axis == 3 and stored.values.dtype == np.int8 and stored.scales.shape == (5,)
    assert np.abs(stored.values).max() == 127
    np.testing.assert_allclose(dequantized(kernel), kernel, atol=float(stored.scales.max()) / 2 + 1e-6)
    depthwise = int8_kernel(kernel[..., :1], depthwise=True)
    assert depthwise.axis == 2 and depthwise.scales.shape == (4,)


def test_quantize_mode_is_checked():
    with pytest.raises(ValueError, match="quantize"):
        ExportConfig(quantize="int4")
    assert "quantize" not in ExportConfig().to_dict() and CONFIG.to_dict()["quantize"] == "int8"


def test_a_bring_your_own_model_exports_int8_and_verifies():
    """A user's Keras CNN (LeakyReLU, asymmetric padding, pooling): its frozen conv runs int8, the self-test passes."""
    from tools.example_models import EXAMPLE_MODELS
    from tflite_train.converters.export import export_keras

    config = ExportConfig(backbone="keras", input_size=None, candidates="layers:2", feature_layer="features",
                          class_capacity=4, train_variants=0, cache_cuts=1, quantize="int8",
                          calibration="synthetic:16")
    result = export_keras(EXAMPLE_MODELS["plain_cnn"](), config)
    model = read_model(result.model)
    assert _conv_types(model, _signature_subgraph(model, C.INFER))[schema.TensorType.INT8] == 1  # conv1
    assert result.metadata[C.F_CONFIG]["quantize"] == "int8"
    outcome = verify(result.model, runtime="litert")
    assert outcome.passed, outcome.format()


def test_int8_weights_stores_every_kernel_int8_and_computes_float():
    """``quantize="int8-weights"``: no int8 arithmetic, every convolution filter read through DEQUANTIZE, the
    self-test passes with the float tolerances (the goldens use the dequantized weights)."""
    result = export_model(ExportConfig(backbone="tiny", input_size=(32, 32), candidate_blocks=2, class_capacity=4,
                                       train_variants=0, cache_cuts=1, quantize="int8-weights"))
    model = read_model(result.model)
    infer = _signature_subgraph(model, C.INFER)
    ops = collections.Counter(_op_name(model, op) for op in infer.operators)
    assert not ops[schema.BuiltinOperator.QUANTIZE]
    assert not _conv_types(model, infer)[schema.TensorType.INT8]
    assert len(result.module.int8_kernels) == len(list(result.module.graph.weighted()))
    outcome = verify(result.model, runtime="litert")
    assert outcome.passed, outcome.format()
    assert max(outcome.deviation.values()) < 1e-3


def _int8_kernel_owners(path: pathlib.Path) -> tuple[set[str], list[list[str]]]:
    """(candidates, for each per-channel int8 constant of the file the candidates whose kernel it is) after
    ``reset_state``: a constant matches a kernel when its dequantized value, in the variable's layout, equals the
    state bit for bit."""
    meta = read_metadata(path)
    interpreter = Interpreter(model_path=str(path))
    interpreter.get_signature_runner(C.RESET_STATE)(dummy=np.array(0, np.int32))
    state = interpreter.get_signature_runner(C.GET_STATE)(dummy=np.array(0, np.int32))
    kernels = {n: state[n + C.KERNEL_SUFFIX] for n in meta["candidates"]}
    owners = [[n for n, k in kernels.items() if np.array_equal(_keras_layout(value, axis, k.shape), k)]
              for value, _, axis in _stored_int8_kernels(read_model(path.read_bytes()))]
    return set(kernels), owners


def test_int8_candidates_fixture_stores_only_the_candidate_kernels_int8():
    """The fixture ``tiny_int8c_33`` (``tools.fixtures``, ``--quantize int8-candidates``): each int8 constant
    is a candidate kernel as ``reset_state`` writes it, each candidate kernel is stored int8, and the self-test
    passes with the float tolerances."""
    path = FIXTURE_DIR / "tiny_int8c_33.tflite"
    if not path.exists():
        pytest.fail(f"missing {path}: run `python -m tools.fixtures --out {FIXTURE_DIR}` (make fixtures)")
    assert read_metadata(path)["config"]["quantize"] == "int8-candidates"
    candidates, owners = _int8_kernel_owners(path)
    assert owners and all(owners), "every int8 constant is a candidate kernel"
    assert {n for names in owners for n in names} == candidates, "every candidate kernel is stored int8"
    outcome = verify(path, runtime="litert")
    assert outcome.passed and max(outcome.deviation.values()) < 1e-3, outcome.format()


def test_cli_exports_a_keras_model_with_quantize_int8_candidates(tmp_path, capsys):
    """``tflite-train export --keras-model ... --quantize int8-candidates``: the flag reaches the config (recorded
    in the metadata), both candidate kernels are stored int8 and nothing else is, and the file verifies."""
    from tools.example_models import EXAMPLE_MODELS
    from tflite_train.cli import main

    path, out = tmp_path / "m.keras", tmp_path / "m.tflite"
    EXAMPLE_MODELS["plain_cnn"]().save(path)
    assert main(["export", "--keras-model", str(path), "--out", str(out), "--candidates", "layers:2",
                 "--feature-layer", "features", "--capacity", "4", "--quantize", "int8-candidates"]) == 0
    meta = read_metadata(out)
    assert meta["config"]["quantize"] == "int8-candidates" and "calibration" not in meta["config"]
    candidates, owners = _int8_kernel_owners(out)
    assert len(candidates) == 2 and owners and all(owners), "every int8 constant is a candidate kernel"
    assert {n for names in owners for n in names} == candidates, "every candidate kernel is stored int8"
    outcome = verify(out, runtime="litert")
    assert outcome.passed and max(outcome.deviation.values()) < 1e-3, outcome.format()


def test_cli_refuses_calibration_without_quantize_int8(tmp_path, capsys):
    from tflite_train.cli import main

    out = tmp_path / "m.tflite"
    assert main(["export", "--backbone", "tiny", "--out", str(out), "--quantize", "int8-candidates",
                 "--calibration", "synthetic:4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--calibration" in err and "--quantize int8" in err, err
    assert not out.exists()


def test_quantization_tables_are_shared_in_int8_files_only():
    """``write_model`` packs each distinct quantization table once in a file with int8 tensors (read back
    unchanged), and leaves a float file byte for byte (its tensors' empty tables are not merged)."""
    for name, quantized in (("tiny_adam_33", False), ("tiny_int8_33", True)):
        path = FIXTURE_DIR / f"{name}.tflite"
        if not path.exists():
            pytest.fail(f"missing {path}: run `python -m tools.fixtures --out {FIXTURE_DIR}` (make fixtures)")
        raw = path.read_bytes()
        model = read_model(raw)
        tables = sum(t.quantization is not None for g in model.subgraphs for t in g.tensors or [])
        shared = share_quantization_tables(model)
        assert (0 < shared < tables) if quantized else shared == 0, (name, shared, tables)
        assert write_model(read_model(raw), len(raw)) == raw, name
