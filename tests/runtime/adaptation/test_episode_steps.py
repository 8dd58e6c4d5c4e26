"""Gradient accumulation and episode steps from the cached cut (issue 39) on whatever interpreter is
installed (LiteRT here, tflite-runtime 2.14 in the Pi env).

Invariant: rows r_1..r_B accumulated in any chunking (B one-row calls, or 2 + 3) and then ``apply_accumulated``
give the weights, optimizer slots and step of ONE ``train_step_from`` on [r_1..r_B]. Tolerance: every state
variable within 1e-4 of its largest magnitude (max |a - b| / max |b|, as ``test_cached_cut_steps``), with at
most 0.1 % of a variable's entries off by more than 1e-5 of that magnitude; losses rtol 1e-5. The two differ by
float32 rounding only (the summed gradient divided by B against the gradient of the mean); measured on LiteRT:
<= 2e-6 relative. The episode step's parity with TensorFlow autodiff is in ``test_signature_parity``.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import fixture_model
from tflite_train.runtime import TrainableModel

ACCUMULATING = ("tiny_adam_33", "byo_plain_cnn_23", "mbv2_adam_32")
"""Adam on the tiny built-in and MobileNetV2 (residual blocks), SGD with momentum on a plain user CNN."""
STATE_TOL = 1e-4
OFF_TOL, OFF_FRACTION = 1e-5, 1e-3


def _assert_state_close(actual: dict, expected: dict) -> None:
    for key, want in expected.items():
        scale = max(float(np.max(np.abs(want))), 1e-12)
        diff = np.abs(actual[key].astype(np.float64) - want)
        assert float(np.max(diff)) <= STATE_TOL * scale, key
        assert float(np.mean(diff > OFF_TOL * scale)) <= OFF_FRACTION, key


@pytest.fixture(scope="module", params=ACCUMULATING)
def model(request):
    model = TrainableModel(fixture_model(request.param))
    assert model.can_accumulate and all(c.accumulate_signature and c.episode_signature for c in model.cached_cuts)
    return model


def _start(model: TrainableModel, n: int = 5, classes: int = 3, cut_index: int = -1):
    """Resets ``model``, sets a head of class means and a selection of two layers from ``cut``; returns
    (cut, activations, labels)."""
    rng = np.random.default_rng(7)
    low, high = model.metadata["input"]["range"]
    images = rng.uniform(low, high, (n, *model.input_shape)).astype(np.float32)
    labels = (np.arange(n) % classes).astype(np.int32)
    model.reset_state()
    emb = model.infer(images)["embeddings"]
    model.set_head(np.stack([emb[labels == k].mean(0) for k in range(classes)]))
    cut = model.cached_cuts[cut_index]
    above = [n for n in model.candidates if model._layer_index[n] >= cut.index]
    channels = model.candidate_channels
    model.set_selection({above[0]: list(range(0, channels[above[0]], 2)), above[-1]: [0, channels[above[-1]] - 1]})
    assert model.cache_cut() == cut
    return cut, model.features(cut, images), labels


@pytest.mark.parametrize("cut_index", [0, -1])
def test_accumulated_rows_step_like_one_batched_step(model, cut_index):
    cut, activations, labels = _start(model, cut_index=cut_index)
    batched = model.train_step_from(cut, activations, labels)
    expected = model.get_state()
    for chunks in ([1, 1, 1, 1, 1], [2, 3], [5]):
        cut, activations, labels = _start(model, cut_index=cut_index)
        before = model.get_state()
        losses, start = [], 0
        for size in chunks:
            out = model.accumulate_from(cut, activations[start:start + size], labels[start:start + size])
            losses += [out["loss"]] * size
            start += size
        after_accumulating = model.get_state()
        for key, value in before.items():  # no weight, slot or step changes
            assert np.array_equal(after_accumulating[key], value), (chunks, key)
        np.testing.assert_allclose(np.mean(losses), batched["loss"], rtol=1e-5)
        model.apply_accumulated()
        state = model.get_state()
        assert state["step"] == 1
        _assert_state_close(state, expected)
        assert any(not np.array_equal(state[k], before[k]) for k in state if k.endswith("_kernel")), chunks


def test_two_accumulated_steps_equal_two_batched_steps(model):
    """The second step's bias corrections and slots: accumulate + apply twice == train_step_from twice."""
    cut, activations, labels = _start(model)
    for _ in range(2):
        model.train_step_from(cut, activations, labels)
    expected = model.get_state()
    cut, activations, labels = _start(model)
    for _ in range(2):
        for n in range(len(labels)):
            model.accumulate_from(cut, activations[n:n + 1], labels[n:n + 1])
        model.apply_accumulated()
    state = model.get_state()
    assert state["step"] == 2
    _assert_state_close(state, expected)


@pytest.mark.parametrize("discard", ["reset_state", "set_selection", "set_state"])
def test_a_discarded_accumulation_does_not_reach_the_next_step(model, discard):
    """Rows accumulated before ``reset_state`` (then the same state written back), ``set_selection`` or
    ``set_state`` do not count: accumulating rows 3..5 afterwards and applying == ``train_step_from`` on 3..5.
    (``apply_accumulated``'s own zeroing: ``test_two_accumulated_steps_equal_two_batched_steps``.)"""
    cut, activations, labels = _start(model)
    model.train_step_from(cut, activations[2:], labels[2:])
    expected = model.get_state()
    cut, activations, labels = _start(model)
    saved = model.get_state()
    model.accumulate_from(cut, activations[:2], labels[:2])
    if discard == "reset_state":
        model.reset_state()
        model.set_state(saved)
    elif discard == "set_selection":
        model.set_selection(np.concatenate([saved[name + "_mask"] for name in model.candidates]))
    else:
        model.set_state(saved)
    model.accumulate_from(cut, activations[2:], labels[2:])
    model.apply_accumulated()
    _assert_state_close(model.get_state(), expected)


def test_apply_without_accumulated_rows_changes_nothing(model):
    """After ``reset_state`` (rows were pending) or with nothing accumulated: no step, no change."""
    cut, activations, labels = _start(model)
    for pending in (False, True):
        if pending:
            model.accumulate_from(cut, activations, labels)
            model.reset_state()
        before = model.get_state()
        model.apply_accumulated()
        after = model.get_state()
        for key, value in before.items():
            assert np.array_equal(after[key], value), (pending, key)
        assert after["step"] == 0


def test_episode_step_updates_without_touching_the_prototypes(model):
    cut, activations, labels = _start(model, n=6)
    prototypes = model.get_state()["prototypes"]
    support = np.array([1, 1, 1, 0, 0, 0], np.float32)
    first = model.episode_step_from(cut, activations, labels, support)
    second = model.episode_step_from(cut, activations, labels, support)
    state = model.get_state()
    assert state["step"] == 2 and np.array_equal(state["prototypes"], prototypes)
    assert np.isfinite([first["loss"], second["loss"]]).all() and second["loss"] < first["loss"]
    assert 0.0 <= first["accuracy"] <= 1.0


def test_episode_step_without_support_for_a_class_is_finite(model):
    """Class 2 has query rows but no support row (a zero prototype); class 1 a single support row."""
    cut, activations, labels = _start(model, n=6)
    labels = np.array([0, 0, 1, 0, 2, 2], np.int32)
    support = np.array([1, 1, 1, 0, 0, 0], np.float32)
    out = model.episode_step_from(cut, activations, labels, support)
    state = model.get_state()
    assert np.isfinite(out["loss"]) and all(np.isfinite(v).all() for v in state.values())


def test_episode_and_accumulation_inputs_are_checked(model):
    cut, activations, labels = _start(model, n=4)
    with pytest.raises(ValueError, match="support_mask must be a 0/1 array of shape"):
        model.episode_step_from(cut, activations, labels, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="support_mask must be a 0/1 array"):
        model.episode_step_from(cut, activations, labels, np.full(4, 0.5, np.float32))
    with pytest.raises(ValueError, match="at least one support row"):
        model.episode_step_from(cut, activations, labels, np.ones(4, np.float32))
    with pytest.raises(ValueError, match="labels must"):
        model.accumulate_from(cut, activations, labels[:3])
    top = model.cached_cuts[-1]
    below = [n for n in model.candidates if model._layer_index[n] < top.index]
    top_activations = model.features(top, np.zeros((4, *model.input_shape), np.float32))
    model.set_selection({below[0]: [0]})
    for step in (model.accumulate_from, lambda *a: model.episode_step_from(*a, np.array([1, 0, 1, 0], np.float32))):
        with pytest.raises(ValueError, match="below"):
            step(top, top_activations, labels)


def test_older_file_has_no_accumulation():
    model = TrainableModel(fixture_model("tiny_nocache_17"))
    assert not model.can_accumulate and model.cached_cuts == ()
    with pytest.raises(ValueError, match="no apply_accumulated signature"):
        model.apply_accumulated()
