"""The cached cut (issue 26) on whatever interpreter is installed (LiteRT here, tflite-runtime 2.14
in the Pi env): steps from the cached activation equal full steps, on built-in and bring-your-own models.

Tolerances: losses rtol 1e-5; every state variable within 1e-4 of its largest magnitude (max |a - b| /
max |b|, the self-test's measure at a tenth of its 1e-3 ``state`` tolerance). The cached step runs the same
ops on the same values; measured differences are float32 rounding: 0 on LiteRT, up to 3e-6 absolute
(prototypes of magnitude ~2) on tflite-runtime 2.14's builtin kernels, whose prefix results depend on the
batch the prefix ran at (the cache computes it in chunks, full steps one image at a time).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import fixture_model
from tflite_train.runtime import AdaptConfig, TrainableModel, adapt, read_metadata

CACHED = ("tiny_adam_33", "mcunet_adam_35", "mbv2_adam_32", "lite0_meta_adam_64", "byo_mobilenet_v2_32",
          "byo_mobilenet_v3_small_32", "byo_plain_cnn_23")
"""Built-in backbones (Adam) and user models (MobileNetV2/V3, a plain CNN with SGD) with cache signatures."""
NO_CACHE = "tiny_nocache_17"
"""Exported with ``cache_signatures=False``: a file like those written before the cache existed."""


STATE_TOL = 1e-4


def _assert_state_close(actual: dict, expected: dict) -> None:
    for key, want in expected.items():
        scale = max(float(np.max(np.abs(want))), 1e-12)
        assert float(np.max(np.abs(actual[key] - want))) <= STATE_TOL * scale, key


@pytest.fixture(scope="module", params=CACHED)
def model_path(request):
    return fixture_model(request.param)


def _task(model: TrainableModel, n: int = 6, classes: int = 3, seed: int = 1):
    low, high = model.metadata["input"]["range"]
    rng = np.random.default_rng(seed)
    images = rng.uniform(low, high, size=(n, *model.input_shape)).astype(np.float32)
    return images, (np.arange(n) % classes).astype(np.int32)


def _headed(path, images, labels) -> TrainableModel:
    model = TrainableModel(path)
    emb = model.infer(images)["embeddings"]
    model.set_head(np.stack([emb[labels == k].mean(0) for k in range(int(labels.max()) + 1)]))
    return model


def test_every_cut_listed_and_validated(model_path):
    model = TrainableModel(model_path)
    meta = read_metadata(model_path)
    assert model.cached_cuts, "fixtures export with the cache signatures"
    index = {layer["name"]: layer["index"] for layer in meta["layers"]}
    lowest = min(index[n] for n in meta["candidates"])
    assert model.cached_cuts[0].index >= lowest
    variants = {v["lowest_index"] for v in meta["train_variants"]}
    cached = {c.index for c in model.cached_cuts}
    assert not cached & variants, "a cached cut needs no image-input variant"
    block_starts = {}
    for layer in meta["layers"]:
        if layer["name"] in meta["candidates"]:
            block_starts.setdefault(layer["block"], layer["index"])
    assert cached <= set(block_starts.values()) | {lowest} or len(block_starts) < 2
    images, _ = _task(model, n=2)
    for cut in model.cached_cuts:
        assert model.features(cut, images).shape == (2, *cut.shape)
        assert 0 < cut.suffix_forward_macs < sum(layer["forward_macs"] for layer in meta["layers"])


@pytest.mark.parametrize("steps", [3])
def test_steps_from_cache_equal_full_steps(model_path, steps):
    """For every cut: N steps from the cache == N full steps (losses, every state variable), and
    ``infer_from`` on the trained state == ``infer``."""
    meta = read_metadata(model_path)
    index = {layer["name"]: layer["index"] for layer in meta["layers"]}
    channels = {layer["name"]: layer["out_channels"] for layer in meta["layers"]}
    probe = TrainableModel(model_path)
    images, labels = _task(probe)
    for cut in probe.cached_cuts:
        above = [n for n in meta["candidates"] if index[n] >= cut.index]
        selection = {above[0]: list(range(0, channels[above[0]], 2)), above[-1]: [0, channels[above[-1]] - 1]}
        full = _headed(model_path, images, labels)
        full.set_selection(selection)
        assert full.cache_cut() == cut
        full_losses = [full.train_step(images[i::2], labels[i::2])["loss"] for i in range(steps)]
        cached = _headed(model_path, images, labels)
        cached.set_selection(selection)
        activations = cached.features(cut, images)
        cached_losses = [cached.train_step_from(cut, activations[i::2], labels[i::2])["loss"] for i in range(steps)]
        np.testing.assert_allclose(cached_losses, full_losses, rtol=1e-5, err_msg=cut.layer)
        state_full, state_cached = full.get_state(), cached.get_state()
        _assert_state_close(state_cached, state_full)
        initial = TrainableModel(model_path).get_state()
        changed = sum(not np.array_equal(state_full[k], initial[k]) for k in state_full if k.endswith("_kernel"))
        assert changed >= 1, "the steps changed no kernel"
        np.testing.assert_allclose(cached.infer_from(cut, cached.features(cut, images))["embeddings"],
                                   full.infer(images)["embeddings"], rtol=1e-5, atol=1e-5)


def test_cached_step_refused_when_a_layer_below_is_selected(model_path):
    model = TrainableModel(model_path)
    top = model.cached_cuts[-1]
    below = [n for n in model.candidates if model._layer_index[n] < top.index]
    if not below:
        pytest.skip("no candidate below the highest cut")
    images, labels = _task(model)
    model.set_head(np.ones((3, model.feature_dim), np.float32))
    model.set_selection({below[0]: [0]})
    assert model.cache_cut() is None or model.cache_cut().index <= model._layer_index[below[0]]
    with pytest.raises(ValueError, match="below"):
        model.train_step_from(top, model.features(top, images), labels)
    with pytest.raises(ValueError, match="not a cached cut"):
        model.features("no_such_layer", images)


def _has_cut(model: TrainableModel, result) -> bool:
    """True when a cached cut lies at or below the deepest layer ``result`` selected."""
    deepest = min(model._layer_index[name] for name in result.selection.channels)
    return any(cut.index <= deepest for cut in model.cached_cuts)


def test_adapt_with_cache_equals_adapt_without(model_path):
    """``adapt`` from the cache and with full steps: the same losses and the same adapted state. (A
    selection that reaches a layer reading the image, e.g. the plain CNN's stem, has no cut: full steps.)"""
    model = TrainableModel(model_path)
    images, labels = _task(model, n=6)
    runs = []
    for cache in (True, False):
        config = AdaptConfig(policy="tinytrain", epochs=2, cache=cache, augment_views=2, seed=3)
        result = adapt(model, images, labels, config)
        assert result.cache.used == (cache and _has_cut(model, result)), result.cache.reason
        if cache and not result.cache.used:
            assert "no cached cut" in result.cache.reason
        runs.append((result.losses, model.get_state()))
    (losses_c, state_c), (losses_f, state_f) = runs
    assert len(losses_c) == 12
    np.testing.assert_allclose(losses_c, losses_f, rtol=1e-5)
    _assert_state_close(state_c, state_f)


def test_older_file_without_cache_adapts_through_the_fallback():
    path = fixture_model(NO_CACHE)
    model = TrainableModel(path)
    assert model.cached_cuts == () and "cached_cuts" not in read_metadata(path) or not read_metadata(path)["cached_cuts"]
    images, labels = _task(model, n=6)
    result = adapt(model, images, labels, AdaptConfig(policy="tinytrain", epochs=2))
    assert not result.cache.used and "no cached-cut signatures" in result.cache.reason
    assert len(result.losses) == 12 and np.isfinite(result.losses).all()
    assert result.losses[-1] < result.losses[0]


def test_cache_over_its_limit_falls_back(model_path):
    model = TrainableModel(model_path)
    images, labels = _task(model, n=6)
    result = adapt(model, images, labels, AdaptConfig(policy="tinytrain", epochs=1, cache_memory_bytes=1))
    assert not result.cache.used and len(result.losses) == 6
    if _has_cut(model, result):
        assert "over its limit" in result.cache.reason and result.cache.cache_bytes > 1
    else:
        assert "no cached cut" in result.cache.reason
