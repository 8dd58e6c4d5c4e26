"""Opening only some signatures (``TrainableModel(signatures=...)``, ``signature_subset``) and calling the
batched signatures in chunks (``max_rows``): the same outputs as the whole model, and a signature left
out is refused."""

from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import fixture_model, relative_error
from tflite_train import contract as C
from tflite_train.runtime import TrainableModel
from tflite_train.runtime.model.flatbuffer_graph import read_graph
from tflite_train.runtime.model.signature_subset import keep_signatures, keep_state_outputs

pytestmark = pytest.mark.pi


def _images(model, n, seed=0):
    low, high = model.metadata[C.F_INPUT][C.F_RANGE]
    return np.random.default_rng(seed).uniform(low, high, (n,) + model.input_shape).astype(np.float32)


def test_kept_signatures_compute_what_the_whole_model_computes():
    path = fixture_model("mcunet_adam_35")
    full = TrainableModel(path)
    part = TrainableModel(path, signatures=(C.INFER, C.SET_HEAD, C.FISHER))
    prototypes = np.random.default_rng(1).standard_normal((3, full.feature_dim)).astype(np.float32)
    for model in (full, part):
        model.set_head(prototypes)
    x = _images(full, 3)
    np.testing.assert_array_equal(part.infer(x)[C.LOGITS], full.infer(x)[C.LOGITS])
    labels = np.array([0, 1, 2])
    for name, value in full.fisher(x, labels).items():
        np.testing.assert_array_equal(part.fisher(x, labels)[name], value, err_msg=name)
    with pytest.raises(ValueError, match="'train_step' was not opened"):
        part.train_step(x[:1], labels[:1])


def test_only_unreached_subgraphs_are_emptied():
    data = bytearray(fixture_model("tiny_adam_33").read_bytes())
    graph = read_graph(data)
    emptied = keep_signatures(data, [C.INFER], graph)
    reached = graph.reachable([0, graph.signatures[C.INFER]])
    after = read_graph(data)
    assert emptied == sum(1 for i, ops in enumerate(graph.operators) if ops and i not in reached) > 0
    for index, operators in enumerate(after.operators):
        assert (operators == graph.operators[index]) if index in reached else not operators, index
    with pytest.raises(ValueError, match="no signature nope"):
        keep_signatures(bytearray(data), ["nope"], graph)


def test_chunked_calls_give_the_unchunked_outputs():
    """Rows are computed independently; the kernels may sum in another order at another batch size (seen on
    tflite-runtime 2.14's builtin kernels), hence 1e-6 of the largest value."""
    path = fixture_model("tiny_adam_33")
    whole, chunked = TrainableModel(path), TrainableModel(path, max_rows=2)
    x = _images(whole, 5)
    for key, value in whole.infer(x).items():
        got = chunked.infer(x)[key]
        assert got.shape == value.shape and relative_error(got, value) < 1e-6, key
    cut = whole.cached_cuts[0]
    assert relative_error(chunked.features(cut, x), whole.features(cut, x)) < 1e-6


def test_get_state_kept_to_some_outputs_reads_them_and_nothing_else():
    path = fixture_model("tiny_adam_33")
    whole = TrainableModel(path)
    names = [C.NUM_CLASSES, C.PROTOTYPES, C.STEP, whole.candidates[-1] + C.KERNEL_SUFFIX]
    part = TrainableModel(path, signatures=(C.GET_STATE, C.SET_HEAD), state_outputs=names)
    prototypes = np.random.default_rng(2).standard_normal((3, whole.feature_dim)).astype(np.float32)
    for model in (whole, part):
        model.set_head(prototypes)
    got, want = part.get_state(names), whole.get_state(names)
    for name in names:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    with pytest.raises(ValueError, match="reads only"):
        part.get_state()
    with pytest.raises(ValueError, match="reads only"):
        part.get_state([whole.candidates[0] + C.KERNEL_SUFFIX])


def test_get_state_keeps_the_reads_of_its_kept_outputs_and_empties_the_others():
    data = bytearray(fixture_model("tiny_adam_33").read_bytes())
    graph = read_graph(data)
    outputs = graph.signature_outputs[C.GET_STATE]
    names = [C.NUM_CLASSES, C.PROTOTYPES]
    assert keep_state_outputs(data, names, graph)
    after = read_graph(data)
    subgraph = graph.signatures[C.GET_STATE]
    kept = after.operators[subgraph]
    assert [op.name for op in kept].count("CALL_ONCE") == 1
    assert {t for op in kept for t in op.outputs} >= {outputs[n] for n in names}
    assert sum(op.name == "READ_VARIABLE" for op in kept) == len(names)
    for name, tensor in outputs.items():
        shape = after.tensor_shape(subgraph, tensor)
        assert (shape == graph.tensor_shape(subgraph, tensor)) if name in names else not any(shape), name
    with pytest.raises(ValueError, match="no output nope"):
        keep_state_outputs(bytearray(data), ["nope"], graph)
