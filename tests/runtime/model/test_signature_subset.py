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
from tflite_train.runtime.model.signature_subset import keep_signatures

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
