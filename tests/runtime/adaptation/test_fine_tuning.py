"""One fine-tuning run (``tflite_train.runtime.adaptation.fine_tuning``): the update plan, the row bookkeeping, and the
procedure through ``adapt`` on an exported model (prototypes from the cache, the per-task rate choice)."""

from __future__ import annotations

import numpy as np
import pytest

from tflite_train.runtime import AdaptConfig, TrainableModel, adapt, embed, predict
from tflite_train.runtime.adaptation.fine_tuning import RowSource, class_prototypes, plan_updates, view_rows
from tflite_train.runtime.adaptation.pseudo_queries import pseudo_query_batches

from tests.runtime.runtime_fixtures import episode_arrays, fixture_model


def _plan(prototype_mode="refresh", mode="batch", batch=8, *, cached=True, episode=True, accumulate=True, limit=100):
    return plan_updates(prototype_mode, mode, batch, 5, cached=cached, episode=episode, accumulate=accumulate,
                        fits=lambda rows: rows <= limit)


def test_a_batch_that_fits_runs_as_one_step():
    plan = _plan()
    assert (plan.mode, plan.batch, plan.rows, plan.note) == ("batch", 8, 8, "")


def test_a_batch_over_b_mem_is_reduced_with_a_note():
    plan = _plan(limit=3)
    assert (plan.mode, plan.batch, plan.rows) == ("batch", 3, 3)
    assert plan.note == "a batch of 8 pseudo-queries exceeds B_mem: reduced to 3"
    assert _plan(limit=0).batch == 1  # never below one row


def test_accumulation_holds_one_row_and_falls_back_without_its_signatures():
    assert (_plan(mode="accumulate", limit=1).mode, _plan(mode="accumulate", limit=1).rows) == ("accumulate", 1)
    fallback = _plan(mode="accumulate", accumulate=False, limit=2)
    assert (fallback.mode, fallback.batch) == ("batch", 2)
    assert "no gradient accumulation" in fallback.note and "reduced to 2" in fallback.note


def test_episode_steps_count_the_support_rows_and_fall_back_to_refresh():
    plan = _plan("episode", limit=13)  # 5 support + 8 pseudo-queries
    assert (plan.prototype_mode, plan.rows) == ("episode", 13)
    over = _plan("episode", limit=12)
    assert over.prototype_mode == "refresh" and "exceeds B_mem" in over.note
    uncached = _plan("episode", cached=False)
    assert uncached.prototype_mode == "refresh" and "cached cut" in uncached.note


def test_view_rows_map_a_subset_to_its_views():
    # 4 support images, 2 views (rows v * 4 + i); the subset {1, 3}: local row r = v * 2 + j
    subset = np.array([1, 3])
    assert view_rows(np.array([0, 1, 2, 3]), subset, 4).tolist() == [1, 3, 5, 7]
    # over the whole set the mapping is the identity (the previous procedure's rows)
    rng = np.random.default_rng(0)
    batches = pseudo_query_batches(rng, 4, 3, 5, views=2)
    assert all(np.array_equal(view_rows(b, np.arange(4), 4), b) for b in batches)


# ------------------------------------------------------------------ through adapt, on an exported model
class _Identity:
    """A model whose prefix is the identity: ``features`` returns its rows (so the rows are their activations)."""

    def features(self, cut, x):
        return np.asarray(x, np.float32)


def test_replayed_images_read_their_stored_views_by_hand():
    from tflite_train.runtime.model.cached_cut import CachedCut
    from tflite_train.runtime.adaptation.replay_memory import ReplayMemory

    cut = CachedCut("c", 1, (1,), "f", "t", "i", 1)
    support = np.array([[1], [2]], np.float32)
    views = np.array([[11], [21], [12], [22]], np.float32)  # V = 2, view-major: view v of image i at v * 2 + i
    # stored image 0 (plain 100) has the further views 101, 102; image 1 (plain 200) none
    memory = ReplayMemory("c", 1, (1,), 16, np.array([[100], [200], [101], [102]], np.float32),
                          np.array([0, 1, 0, 0], np.int32), np.array([0, 1, 0, 0], np.int32))
    source = RowSource(_Identity(), cut, support, views, chunk_size=4, replay=memory)
    assert source.support[:, 0].tolist() == [1, 2, 100, 200]  # the prototypes' rows: the plain views
    # row v * (N + I) + item: items 0, 1 the new images' view v; 2, 3 the stored images' view v mod e (or plain)
    rows = np.array([0, 1, 2, 3, 4, 5, 6, 7])
    assert source.pseudo_queries(rows)[:, 0].tolist() == [11, 21, 101, 200, 12, 22, 102, 200]
    kept = source.view_activations()
    assert (kept.cut_layer, kept.views) == ("c", 2) and kept.per_image()[:, :, 0].tolist() == [[11, 12], [21, 22]]


FAST = dict(policy="tinytrain", memory_bytes=float("inf"), compute_fraction=None, iterations=3, batch_size=4,
            augment_views=2)


@pytest.fixture(scope="module")
def model():
    return TrainableModel(fixture_model("tiny_adam_33"))


def test_prototypes_from_the_cache_equal_prototypes_from_the_images(model, fashion):
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, ways=3, shots=2, seed=1)
    adapt(model, xs, ys, AdaptConfig(**FAST, learning_rate=1e-2))  # a trained state: above the cut has moved
    for cut in model.cached_cuts:
        source = RowSource(model, cut, xs, xs[:1], chunk_size=4)
        np.testing.assert_allclose(class_prototypes(source.embed(source.support), ys),
                                   class_prototypes(embed(model, xs), ys), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("ways", [2, 4])
def test_one_shot_task_with_rate_choice_makes_no_update(model, fashion, ways):
    """Nothing to hold out: the stated rule (rate 0) applies, without an exception; predictions are None's."""
    xs, ys, xq, _ = episode_arrays(fashion, model.input_shape, ways=ways, shots=1, queries=3, seed=2)
    adapt(model, xs, ys, AdaptConfig(policy="none"))
    untrained = predict(model, xq)
    result = adapt(model, xs, ys, AdaptConfig(**FAST, rate_choice=(0.0, 1e-2)))
    assert result.rate_choice.rate == 0.0 and result.rate_choice.held_out == 0 and result.losses == ()
    np.testing.assert_array_equal(predict(model, xq), untrained)


def test_rate_choice_picks_no_update_when_nothing_scores_better(model, fashion):
    """A rate too small to change any held-out prediction ties with no update, and the tie goes to 0."""
    xs, ys, xq, _ = episode_arrays(fashion, model.input_shape, ways=3, shots=3, queries=3, seed=3)
    adapt(model, xs, ys, AdaptConfig(policy="none"))
    untrained = predict(model, xq)
    result = adapt(model, xs, ys, AdaptConfig(**FAST, rate_choice=(0.0, 1e-12)))
    assert result.rate_choice.rate == 0.0 and result.rate_choice.held_out == 6
    assert [r for r, _ in result.rate_choice.scores] == [0.0, 1e-12]
    np.testing.assert_array_equal(predict(model, xq), untrained)


def test_rate_choice_trains_with_the_winning_rate(model, fashion):
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, ways=3, shots=4, seed=4)
    result = adapt(model, xs, ys, AdaptConfig(**FAST, prototype_mode="refresh", rate_choice=(0.0, 1e-3, 1e-2)))
    choice = result.rate_choice
    assert choice.held_out == 9 and len(choice.scores) == 3
    assert choice.rate == max(choice.scores, key=lambda rs: rs[1])[0]
    assert len(result.losses) == (3 if choice.rate else 0)


def test_accumulated_updates_equal_batched_updates(model, fashion):
    """``batch_mode="accumulate"`` (B batch-1 passes, one apply) gives the losses and the state of B-row steps."""
    assert model.can_accumulate, "the fixture is exported with episode signatures (tools.fixtures)"
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, ways=3, shots=3, seed=5)
    states, losses = {}, {}
    for mode in ("batch", "accumulate"):
        result = adapt(model, xs, ys, AdaptConfig(**FAST, learning_rate=1e-2, batch_mode=mode))
        assert result.updates.mode == mode and result.updates.batch == 4
        states[mode], losses[mode] = model.get_state(), result.losses
    np.testing.assert_allclose(losses["accumulate"], losses["batch"], rtol=1e-5)
    for name, value in states["batch"].items():
        scale = max(float(np.abs(value).max()), 1e-6)
        np.testing.assert_allclose(states["accumulate"][name], value, atol=1e-4 * scale, err_msg=name)


def test_episode_prototypes_train_through_the_support_rows(model, fashion):
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, ways=3, shots=2, seed=6)
    result = adapt(model, xs, ys, AdaptConfig(**FAST, learning_rate=1e-2, prototype_mode="episode"))
    assert result.updates.prototype_mode == "episode" and result.updates.rows == 6 + 4
    assert len(result.losses) == 3 and all(np.isfinite(result.losses))
