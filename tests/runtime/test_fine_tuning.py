"""The update plan and the row bookkeeping of one fine-tuning run (``tflite_train.runtime.fine_tuning``)."""

from __future__ import annotations

import numpy as np

from tflite_train.runtime.fine_tuning import plan_updates, view_rows
from tflite_train.runtime.pseudo_queries import pseudo_query_batches


def _plan(prototypes="refresh", mode="batch", batch=8, *, cached=True, episode=True, accumulate=True, limit=100):
    return plan_updates(prototypes, mode, batch, 5, cached=cached, episode=episode, accumulate=accumulate,
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
    assert (plan.prototypes, plan.rows) == ("episode", 13)
    over = _plan("episode", limit=12)
    assert over.prototypes == "refresh" and "exceeds B_mem" in over.note
    uncached = _plan("episode", cached=False)
    assert uncached.prototypes == "refresh" and "cached cut" in uncached.note


def test_view_rows_map_a_subset_to_its_views():
    # 4 support images, 2 views (rows v * 4 + i); the subset {1, 3}: local row r = v * 2 + j
    subset = np.array([1, 3])
    assert view_rows(np.array([0, 1, 2, 3]), subset, 4).tolist() == [1, 3, 5, 7]
    # over the whole set the mapping is the identity (the previous procedure's rows)
    rng = np.random.default_rng(0)
    batches = pseudo_query_batches(rng, 4, 3, 5, views=2)
    assert all(np.array_equal(view_rows(b, np.arange(4), 4), b) for b in batches)
