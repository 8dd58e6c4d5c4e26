"""``converters.subgraph_dedup``: identical control-flow subgraphs are merged, every index is renumbered,
and outputs do not change.

Golden by hand: a model built field by field (which subgraphs merge, the indices after renumbering).
Converted: a module whose two signatures each run the same copy-on-write ``tf.cond`` twice (the layout of
``converters.copy_on_write``), converted with TF's converter, then rewritten; its outputs before and
after are compared bit for bit on ai-edge-litert with the batch size alternating between signatures.
Exported: the fixtures are at the pass's fixed point and pass the runtime's flatbuffer verifier.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
from tensorflow.lite.python import schema_py_generated as schema

from tflite_train.converters.export import convert_saved_module
from tflite_train.converters.flatbuffer_rewrite import read_model, write_model
from tflite_train.converters.subgraph_dedup import dedupe_subgraphs_in, signatures_reaching
from tflite_train.runtime.model.flatbuffer_verify import verify_model

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "build" / "test-models"


# ------------------------------------------------------------------ hand-built golden
def _subgraph(name: str, ifs: list[tuple[int, int]] = (), shape=(1, 4), const: float | None = None) -> schema.SubGraphT:
    """One float tensor [shape] (a constant holding ``const`` when given) and one IF per (then, else)."""
    sg = schema.SubGraphT()
    sg.name = name
    tensor = schema.TensorT()
    tensor.shape = np.array(shape, np.int32)
    tensor.type = schema.TensorType.FLOAT32
    tensor.name = f"{name}_t"
    tensor.buffer = 0 if const is None else int(const)
    sg.tensors = [tensor]
    sg.inputs = np.array([0], np.int32)
    sg.outputs = np.array([0], np.int32)
    sg.operators = []
    for then, other in ifs:
        op = schema.OperatorT()
        op.opcodeIndex = 0
        op.inputs = np.array([0], np.int32)
        op.outputs = np.array([0], np.int32)
        op.builtinOptionsType = schema.BuiltinOptions.IfOptions
        op.builtinOptions = schema.IfOptionsT()
        op.builtinOptions.thenSubgraphIndex = then
        op.builtinOptions.elseSubgraphIndex = other
        sg.operators.append(op)
    return sg


def _model() -> schema.ModelT:
    """Entries 0 (signature a) and 1 (signature b). a calls (2, 3) and (4, 5); b calls (6, 7) and (12, 12).
    Leaves 2, 4, 6, 8, 9, 10 are identical; 3, 5, 7 each call a leaf (8, 9, 10); 12 calls (11, 13), two
    constant leaves whose buffers (1, 2) hold the same bytes."""
    model = schema.ModelT()
    model.version = 3
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.IF
    model.operatorCodes = [code]
    empty, other = schema.BufferT(), schema.BufferT()
    other.data = np.frombuffer(np.float32([1, 2, 3, 4]).tobytes(), np.uint8)
    same = schema.BufferT()
    same.data = np.frombuffer(np.float32([1, 2, 3, 4]).tobytes(), np.uint8)
    model.buffers = [empty, other, same]
    model.subgraphs = [
        _subgraph("a", [(2, 3), (4, 5)]), _subgraph("b", [(6, 7), (12, 12)]),
        _subgraph("leaf_a1"), _subgraph("call_a1", [(8, 8)]), _subgraph("leaf_a2"), _subgraph("call_a2", [(9, 9)]),
        _subgraph("leaf_b"), _subgraph("call_b", [(10, 10)]),
        _subgraph("leaf8"), _subgraph("leaf9"), _subgraph("leaf10"),
        _subgraph("const_b", const=1), _subgraph("call_const_b", [(11, 13)]), _subgraph("const_b_same_bytes", const=2)]
    model.signatureDefs = []
    for key, index in (("a", 0), ("b", 1)):
        sig = schema.SignatureDefT()
        sig.signatureKey = key
        sig.subgraphIndex = index
        sig.inputs, sig.outputs = [], []
        model.signatureDefs.append(sig)
    return model


def _calls(model: schema.ModelT) -> list[list[tuple[int, int]]]:
    return [[(op.builtinOptions.thenSubgraphIndex, op.builtinOptions.elseSubgraphIndex) for op in sg.operators]
            for sg in model.subgraphs]


def test_golden_merges_within_signatures_and_renumbers():
    model = _model()
    assert dedupe_subgraphs_in(model) == 6
    # under a: leaf_a2, leaf8, leaf9 = leaf_a1, then call_a2 = call_a1; under b: leaf10 = leaf_b and
    # const_b_same_bytes = const_b (same bytes, other buffer); call_b != call_const_b (other leaves)
    assert [sg.name for sg in model.subgraphs] == [
        "a", "b", "leaf_a1", "call_a1", "leaf_b", "call_b", "const_b", "call_const_b"]
    assert _calls(model) == [[(2, 3), (2, 3)], [(4, 5), (7, 7)], [], [(2, 2)], [], [(4, 4)], [], [(6, 6)]]
    assert [(s.signatureKey, s.subgraphIndex) for s in model.signatureDefs] == [("a", 0), ("b", 1)]
    assert dedupe_subgraphs_in(model) == 0


def test_golden_across_signatures_reaches_fixed_point():
    model = _model()
    assert dedupe_subgraphs_in(model, across_signatures=True) == 8
    assert [sg.name for sg in model.subgraphs] == ["a", "b", "leaf_a1", "call_a1", "const_b", "call_const_b"]
    assert _calls(model) == [[(2, 3), (2, 3)], [(2, 3), (5, 5)], [], [(2, 2)], [], [(4, 4)]]
    assert dedupe_subgraphs_in(model, across_signatures=True) == 0


def test_golden_keeps_entries_and_different_subgraphs():
    model = _model()
    model.subgraphs[4].tensors[0].shape = np.array([2, 4], np.int32)  # leaf_a2 differs now
    model.subgraphs[9].tensors[0].isVariable = True  # leaf9 too
    model.subgraphs[1] = _subgraph("b_same_as_a", [(2, 3), (4, 5)])  # an entry identical to entry a
    dedupe_subgraphs_in(model, across_signatures=True)
    names = [sg.name for sg in model.subgraphs]
    assert names[:2] == ["a", "b_same_as_a"]
    assert {"leaf_a2", "leaf9", "call_a2"} <= set(names)
    assert "leaf_b" not in names


def test_signatures_reaching_follows_every_if():
    reach = signatures_reaching(_model())
    assert reach[8] == {0} and reach[10] == {1} and reach[13] == {1} and reach[0] == {0}


# ------------------------------------------------------------------ converted by TF
def _convert() -> bytes:
    module = tf.Module()
    module.dirty = tf.Variable(False)
    module.w = tf.Variable(np.full([4, 4], 0.5, np.float32))
    const = tf.constant(np.arange(16, dtype=np.float32).reshape(4, 4) / 16)

    def layer(x):  # the copy-on-write forward: variable path when dirty, constant path otherwise
        return tf.cond(module.dirty, lambda: tf.nn.relu(tf.matmul(x, module.w)),
                       lambda: tf.nn.relu(tf.matmul(x, const)))

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def infer(x):
        return {"y": layer(layer(x))}

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def fisher(x):
        return {"s": tf.reduce_sum(layer(layer(x)) ** 2, axis=0)}

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32, name="scale")])
    def update(scale):
        module.w.assign(module.w * scale)
        module.dirty.assign(True)
        return {"ok": tf.constant(1)}

    return convert_saved_module(module, {"infer": infer, "fisher": fisher, "update": update})


def _rewrite(raw: bytes, across: bool) -> tuple[bytes, int]:
    obj = read_model(raw)
    removed = dedupe_subgraphs_in(obj, across_signatures=across)
    return write_model(obj, len(raw)), removed


def _subgraph_count(raw: bytes) -> int:
    return schema.Model.GetRootAsModel(raw, 0).SubgraphsLength()


def _alternate(raw: bytes) -> list[np.ndarray]:
    """infer(1), fisher(5), infer(3), update, infer(1), fisher(5), infer(3), fisher(2) on one interpreter."""
    interpreter = Interpreter(model_content=raw, num_threads=1)
    rng = np.random.default_rng(0)
    out = []
    for name, batch in (("infer", 1), ("fisher", 5), ("infer", 3), ("update", 0), ("infer", 1), ("fisher", 5),
                        ("infer", 3), ("fisher", 2)):
        runner = interpreter.get_signature_runner(name)
        if name == "update":
            runner(scale=np.float32(1.5))
            continue
        result = runner(x=rng.standard_normal((batch, 4)).astype(np.float32))
        out.extend(np.array(v) for v in result.values())
    return out


@pytest.fixture(scope="module")
def converted() -> bytes:
    return _convert()


@pytest.mark.parametrize("across", [False, True])
def test_converted_outputs_bit_identical(converted, across):
    rewritten, removed = _rewrite(converted, across)
    assert removed > 0
    assert _subgraph_count(rewritten) == _subgraph_count(converted) - removed
    before, after = _alternate(converted), _alternate(rewritten)
    assert len(before) == len(after) == 7
    for b, a in zip(before, after):
        np.testing.assert_array_equal(a, b)


def test_converted_branch_counts(converted):
    # each forward signature's two IFs have identical branches: the default keeps one pair per signature,
    # across signatures keeps one pair in all.
    within, _ = _rewrite(converted, False)
    across, _ = _rewrite(converted, True)
    assert _subgraph_count(across) == _subgraph_count(within) - 2
    original = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(converted, 0))
    before = dict(zip((sg.name for sg in original.subgraphs), signatures_reaching(original)))
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(within, 0))
    after = dict(zip((sg.name for sg in model.subgraphs), signatures_reaching(model)))
    assert after == {name: before[name] for name in after}, "a kept subgraph gained a caller in another signature"
    assert len(after) == 8  # 3 entries, the converter's shared NoOp, one IF branch pair per forward signature


# ------------------------------------------------------------------ exported fixtures
@pytest.mark.parametrize("name", ["tiny_adam", "mcunet_adam"])
def test_exported_fixture_is_at_fixed_point_and_verifies(name):
    paths = sorted(FIXTURES.glob(f"{name}_*.tflite"))
    if not paths:
        pytest.skip(f"no {name} fixture in {FIXTURES} (make fixtures)")
    raw = paths[0].read_bytes()
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(raw, 0))
    count = len(model.subgraphs)
    assert dedupe_subgraphs_in(model) == 0
    verify_model(raw)
    merged, removed = _rewrite(raw, True)
    assert _subgraph_count(merged) == count - removed
    verify_model(merged)
