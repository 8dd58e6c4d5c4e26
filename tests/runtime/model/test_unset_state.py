"""State variables left unset (``TrainableModel(unset_state=...)``, ``signature_subset.skip_initial_values``): the
file's initialiser no longer assigns them, the model computes what the whole model computes while nothing reads
them, and a call that would read one is refused before the interpreter runs (issue 43: the optimizer slots of
layers a phase does not train take no memory)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import fixture_model
from tflite_train import contract as C
from tflite_train.runtime import TrainableModel
from tflite_train.runtime.model.flatbuffer_graph import read_graph
from tflite_train.runtime.model.signature_subset import skip_initial_values

pytestmark = pytest.mark.pi

MODELS = ("tiny_adam_33", "mcunet_adam_35", "tiny_sgd_full_17")


def _images(model, n, seed=0):
    low, high = model.metadata[C.F_INPUT][C.F_RANGE]
    return np.random.default_rng(seed).uniform(low, high, (n,) + model.input_shape).astype(np.float32)


def _assigned(graph, subgraph):
    """The variables the subgraph's ASSIGN_VARIABLE operators write."""
    ops = graph.operators[subgraph]
    variable_of = {t: op.variable for op in ops if op.name == "VAR_HANDLE" for t in op.outputs}
    return [variable_of[op.inputs[0]] for op in ops if op.name == "ASSIGN_VARIABLE"]


@pytest.mark.parametrize("name", MODELS)
def test_the_initialiser_drops_the_named_assignments_and_what_only_fed_them(name):
    data = bytearray(fixture_model(name).read_bytes())
    graph = read_graph(data)
    init = graph.initialiser(graph.signatures)
    layer = TrainableModel(fixture_model(name)).candidates[-1]
    skipped = {f"{layer}{C.KERNEL_SUFFIX}", f"{layer}{C.BIAS_SUFFIX}", C.STEP}
    assert skip_initial_values(data, skipped, list(graph.signatures), graph) == skipped
    before, after = _assigned(graph, init), _assigned(read_graph(data), init)
    assert sorted(after) == sorted(v for v in before if v not in skipped) and len(after) == len(before) - 3
    # nothing dangles and nothing is computed for nothing: each kept operator's inputs are made by a kept one
    # (or are constants / inputs), and each kept output is read by a kept one (or is an assignment's)
    ops = read_graph(data).operators[init]
    made = {t for op in ops for t in op.outputs}
    read = {t for op in ops for t in op.inputs}
    produced_anywhere = {t for op in graph.operators[init] for t in op.outputs}
    for op in ops:
        assert all(t < 0 or t in made or t not in produced_anywhere for t in op.inputs), op
        assert op.name == "ASSIGN_VARIABLE" or set(op.outputs) & read, op
    with pytest.raises(ValueError, match="not state variables of the model: nope"):
        skip_initial_values(bytearray(data), {"nope"}, list(graph.signatures), graph)
    assert skip_initial_values(bytearray(data), set(), list(graph.signatures), graph) == frozenset()


@pytest.mark.parametrize("name", MODELS)
def test_a_model_without_its_slots_computes_what_the_whole_model_computes(name):
    path = fixture_model(name)
    whole = TrainableModel(path)
    lean = TrainableModel(path, unset_state=TrainableModel.slot_names)
    assert lean.unset_state == whole.slot_names() and lean.unset_state
    x, labels = _images(whole, 4), np.array([0, 1, 2, 0])
    head = np.random.default_rng(1).standard_normal((3, whole.feature_dim)).astype(np.float32)
    for model in (whole, lean):
        model.reset_state()  # runs nothing on the lean model: its slots stay unset
        model.set_head(head)
    assert lean.unset_state
    np.testing.assert_array_equal(lean.infer(x)[C.LOGITS], whole.infer(x)[C.LOGITS])
    for key, value in whole.fisher(x, labels).items():
        np.testing.assert_array_equal(lean.fisher(x, labels)[key], value, err_msg=key)
    kernels = [n + C.KERNEL_SUFFIX for n in whole.candidates]
    for key, value in whole.get_state(kernels).items():
        np.testing.assert_array_equal(lean.get_state(kernels)[key], value, err_msg=key)
    assert lean.state_outputs == set(whole.state_specs) - lean.unset_state  # get_state reads the others only
    with pytest.raises(ValueError, match="get_state reads only"):
        lean.get_state()
    layer = whole.candidates[-1]
    for model in (whole, lean):
        model.set_selection({layer: [0]})
    with pytest.raises(ValueError, match=f"would read .*{layer}.*opened without"):
        lean.train_step(x[:2], labels[:2])
    lean.set_state(whole.get_state())  # assigns every variable: nothing is unset any more
    assert not lean.unset_state
    for _ in range(2):
        np.testing.assert_equal(lean.train_step(x[:2], labels[:2]), whole.train_step(x[:2], labels[:2]))


@pytest.mark.parametrize("name", MODELS)
def test_training_with_the_other_layers_slots_unset_is_bit_identical(name):
    path = fixture_model(name)
    whole = TrainableModel(path)
    selected = whole.candidates[-2:]
    lean = TrainableModel(path, unset_state=whole.slot_names(whole.candidates[:-2]))
    assert lean.unset_state == whole.slot_names(whole.candidates[:-2])
    x, labels = _images(whole, 6, seed=2), np.array([0, 1, 0, 1, 0, 1])
    head = np.random.default_rng(3).standard_normal((2, whole.feature_dim)).astype(np.float32)
    selection = {layer: np.arange(0, whole.candidate_channels[layer], 2) for layer in selected}
    for model in (whole, lean):
        model.set_head(head)
        model.set_learning_rate(1e-2)
        model.set_selection(selection)
    for i in range(3):
        rows = slice(2 * i, 2 * i + 2)
        np.testing.assert_equal(lean.train_step(x[rows], labels[rows]), whole.train_step(x[rows], labels[rows]))
    names = sorted(set(whole.state_specs) - lean.unset_state)
    got, want = lean.get_state(names), whole.get_state(names)
    for key in names:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    np.testing.assert_array_equal(lean.infer(x)[C.LOGITS], whole.infer(x)[C.LOGITS])
    lean.reset_state()  # runs now (the model is no longer untouched): every variable assigned
    assert not lean.unset_state
