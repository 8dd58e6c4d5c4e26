"""The pseudo-query views are drawn chunk by chunk when the steps run from the cached cut
(``pseudo_queries.ViewDraw``, ``fine_tuning.RowSource``), with the pixels, the ``features`` calls and the
random stream of drawing them all up front.

Guards (no memory figures here: those live in bench/results/MEMORY.md): ``ViewDraw.chunks`` hands out the
rows of ``draw_views`` in the same chunks and leaves the generator where ``draw_views`` does; a cached
``RowSource`` draws a view only when a ``features`` chunk first needs it, so it holds at most the views one
chunk spans; ``adapt`` with the lazy draw gives the losses and the state (bit for bit) of the same run with
every view drawn before the cache is computed.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import episode_arrays, fixture_model
from tflite_train.runtime import AdaptConfig, TrainableModel, adapt
from tflite_train.runtime.adaptation import trainer
from tflite_train.runtime.adaptation.augmentation import augment
from tflite_train.runtime.adaptation.fine_tuning import RowSource
from tflite_train.runtime.adaptation.pseudo_queries import ViewDraw, draw_views
from tflite_train.runtime.model.cached_cut import CachedCut

pytestmark = pytest.mark.pi


def _noise(images, rng, config):
    """An augmentation that reads the generator (the views differ, and the stream's position shows)."""
    return images + rng.standard_normal(images.shape).astype(np.float32)


def _images(n=5):
    return np.arange(n * 2 * 2 * 1, dtype=np.float32).reshape(n, 2, 2, 1)


@pytest.mark.parametrize("size", [1, 3, 5, 7, 32])
def test_chunks_are_the_drawn_rows_and_leave_the_stream_where_draw_views_does(size):
    eager_rng, lazy_rng = np.random.default_rng(3), np.random.default_rng(3)
    eager = draw_views(eager_rng, _images(), 4, _noise, None)
    chunks = list(ViewDraw(lazy_rng, _images(), 4, _noise, None).chunks(size))
    assert [c.shape[0] for c in chunks] == [min(size, 20 - i) for i in range(0, 20, size)]
    np.testing.assert_array_equal(np.concatenate(chunks), eager)
    assert lazy_rng.integers(1 << 30) == eager_rng.integers(1 << 30)


def test_bad_views_and_chunk_sizes_are_refused():
    with pytest.raises(ValueError, match="views must be an int >= 1"):
        ViewDraw(np.random.default_rng(0), _images(), 0, _noise, None)
    with pytest.raises(ValueError, match="chunk size must be an int >= 1"):
        next(ViewDraw(np.random.default_rng(0), _images(), 2, _noise, None).chunks(0))


class _Recorder:
    """A model stand-in whose ``features`` is the row mean; it logs each call and each view drawn."""

    def __init__(self):
        self.log: list[tuple[str, int]] = []

    def augment(self, images, rng, config):
        self.log.append(("view", images.shape[0]))
        return _noise(images, rng, config)

    def features(self, cut, x):
        self.log.append(("features", x.shape[0]))
        return x.reshape(x.shape[0], -1).mean(axis=1, keepdims=True)


def test_a_cached_source_draws_each_view_when_a_chunk_first_needs_it():
    model, n, chunk = _Recorder(), 5, 3
    cut = CachedCut("c", 0, (1,), "features_c", "train_step_from_c", "infer_from_c", 0)
    source = RowSource(model, cut, None, ViewDraw(np.random.default_rng(1), _images(n), 4, model.augment, None), chunk)
    drawn = done = 0
    for kind, rows in model.log:
        if kind == "view":
            drawn += rows
        else:  # no view drawn beyond the one this chunk ends in: at most the views one chunk spans are held
            done += rows
            assert drawn < done + n
    assert drawn == done == 4 * n
    expected = draw_views(np.random.default_rng(1), _images(n), 4, _noise, None)
    np.testing.assert_array_equal(source.views, model.features(cut, expected))


def test_a_source_without_a_cut_draws_every_view():
    source = RowSource(None, None, None, ViewDraw(np.random.default_rng(2), _images(), 3, _noise, None), 4)
    np.testing.assert_array_equal(source.views, draw_views(np.random.default_rng(2), _images(), 3, _noise, None))


class _DrawnFirst(ViewDraw):
    """Every view drawn before the first chunk (the previous behaviour), the same chunks after."""

    def chunks(self, size):
        views = self.all()
        return iter([views[i:i + size] for i in range(0, views.shape[0], size)])


def test_adapt_with_lazy_views_gives_the_state_of_views_drawn_up_front(fashion, monkeypatch):
    model = TrainableModel(fixture_model("tiny_adam_33"))
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, ways=3, shots=3, seed=7)
    config = AdaptConfig(policy="tinytrain", memory_bytes=float("inf"), compute_fraction=None, iterations=6,
                         batch_size=2, augment_views=3, chunk_size=4, learning_rate=1e-2)
    runs = []
    for draw in (ViewDraw, _DrawnFirst):
        monkeypatch.setattr(trainer, "ViewDraw", draw)
        result = adapt(model, xs, ys, config, augment=augment)
        assert result.cache.used, "the test needs the steps to run from the cache"
        runs.append((result.losses, model.get_state()))
    (lazy_losses, lazy_state), (eager_losses, eager_state) = runs
    assert lazy_losses == eager_losses
    for name, value in eager_state.items():
        np.testing.assert_array_equal(lazy_state[name], value, err_msg=name)
