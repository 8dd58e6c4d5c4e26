"""On-device adaptation on the installed interpreter (ai-edge-litert / tflite-runtime 2.14, no TF)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tflite_train.runtime import TrainableModel, input_range
from tflite_train.runtime import AdaptConfig, adapt, class_prototypes, embed, evaluate, predict, support_fisher
from tflite_train.runtime.adaptation.augmentation import AugmentConfig, augment
from tflite_train.sparse import BudgetError

from tests.runtime.runtime_fixtures import episode_arrays, fixture_model

# TinyTrain on a random-init tiny backbone (no meta-trained weights in the fixture): more steps and a
# larger batch than the paper's 40 x 1 so that 5-shot fine-tuning can move the features at all; the
# model's own learning rate (Adam, 1e-3).
TINY = AdaptConfig(policy="tinytrain", memory_bytes=float(2**20), compute_fraction=0.5, iterations=100,
                   batch_size=4)
TASKS = 10


@pytest.fixture(scope="module")
def model():
    return TrainableModel(fixture_model("tiny_adam_33"))


def test_tinytrain_beats_none_on_real_episodes(model, fashion):
    """Query accuracy of TinyTrain > None, averaged over 10 real 4-way 5-shot Fashion-MNIST tasks
    (20 queries per class), and better on most tasks."""
    none, tiny = [], []
    for seed in range(TASKS):
        xs, ys, xq, yq = episode_arrays(fashion, model.input_shape, seed=seed)
        adapt(model, xs, ys, AdaptConfig(policy="none"))
        none.append(evaluate(model, xq, yq))
        result = adapt(model, xs, ys, TINY)
        tiny.append(evaluate(model, xq, yq))
        assert result.within_budget and not result.selection.is_empty
    print("none", none, "tinytrain", tiny)
    assert np.mean(tiny) > np.mean(none) + 0.03, (none, tiny)
    assert np.sum(np.array(tiny) > np.array(none)) >= 6, (none, tiny)


def test_adapt_is_deterministic_and_reports(model, fashion):
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, seed=7)
    config = AdaptConfig(policy="tinytrain", memory_bytes=float(2**20), compute_fraction=0.15, iterations=6)
    first = adapt(model, xs, ys, config)
    state = model.get_state()
    second = adapt(model, xs, ys, config)
    assert first.selection == second.selection and first.losses == second.losses
    assert all(np.array_equal(state[k], v) for k, v in model.get_state().items())
    assert len(first.losses) == 6 and all(math.isfinite(x) for x in first.losses)
    assert set(first.seconds) == {"head", "fisher_selection", "cache", "training"}
    assert first.cache.used, first.cache.reason
    assert first.cost.total_bytes <= 2**20 and first.cost.backward_macs <= 0.15 * first.full_backward_macs
    report = json.loads(json.dumps(first.to_dict()))
    assert report["within_budget"] and report["selection"]["layers"] == list(first.selection.layers)
    assert int(model.get_state()["num_classes"]) == 4


def test_only_selected_channels_change(model, fashion):
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, seed=3)
    model.reset_state()
    before = model.get_state()
    result = adapt(model, xs, ys, AdaptConfig(policy="tinytrain", compute_fraction=0.15, iterations=3))
    after = model.get_state()
    for name in model.candidates:
        chosen = np.zeros(model.candidate_channels[name], bool)
        chosen[list(result.selection.channels.get(name, ()))] = True
        bias_changed = after[f"{name}_bias"] != before[f"{name}_bias"]
        assert not bias_changed[~chosen].any(), name
        np.testing.assert_array_equal(after[f"{name}_mask"], chosen.astype(np.float32))


def test_policies_on_full_candidate_model(fashion):
    full = TrainableModel(fixture_model("tiny_sgd_full_17"))
    xs, ys, _, _ = episode_arrays(fashion, full.input_shape, ways=3, shots=2, seed=1)
    result = adapt(full, xs, ys, AdaptConfig(policy="full_train", iterations=2))
    assert result.selection.layers == tuple(full.candidates) and "stem" in full.candidates
    assert all(len(result.selection.channels[n]) == c for n, c in full.candidate_channels.items())
    last = adapt(full, xs, ys, AdaptConfig(policy="last_layer", iterations=2))
    assert last.selection.layers == (full.candidates[-1],)
    fixed = adapt(full, xs, ys, AdaptConfig(policy="sparse_update", sparse_update_layers=("b03_expand", "final"),
                                            iterations=2))
    assert set(fixed.selection.layers) <= {"b03_expand", "final"} and fixed.selection.layers


def test_budget_that_fits_nothing(model, fashion):
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, ways=2, shots=2, seed=2)
    with pytest.raises(BudgetError):
        adapt(model, xs, ys, AdaptConfig(policy="tinytrain", memory_bytes=10.0))
    result = adapt(model, xs, ys, AdaptConfig(policy="tinytrain", memory_bytes=10.0, on_empty="empty"))
    assert result.selection.is_empty and result.losses == ()


def test_fisher_chunks_combine_to_the_whole_set(model, fashion):
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, ways=3, shots=3, seed=4)
    model.reset_state()
    model.set_head(class_prototypes(embed(model, xs), ys))
    whole = support_fisher(model, xs, ys, chunk_size=64)
    chunked = support_fisher(model, xs, ys, chunk_size=2)
    for name in model.candidates:
        np.testing.assert_allclose(chunked[name], whole[name], rtol=2e-3, atol=1e-9 * whole[name].max())


def test_prototypes_and_predict_by_hand(model):
    emb = np.array([[1.0, 0.0], [3.0, 2.0], [0.0, 5.0]], np.float32)
    np.testing.assert_allclose(class_prototypes(emb, np.array([0, 0, 1])), [[2.0, 1.0], [0.0, 5.0]])
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(5, *model.input_shape)).astype(np.float32)
    model.reset_state()
    model.set_head(rng.normal(size=(3, model.feature_dim)))
    np.testing.assert_array_equal(predict(model, x, chunk_size=2), model.infer(x)["logits"][:, :3].argmax(1))


def test_augmentation_is_a_parameter(model, fashion):
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, ways=2, shots=2, seed=5)
    seen = []

    def recording(images, rng, config):
        seen.append(images.shape)
        return augment(images, rng, config)

    adapt(model, xs, ys, AdaptConfig(policy="last_layer", iterations=3, batch_size=2, augment_views=5,
                                     augment=AugmentConfig(cutout=0.0)), augment=recording)
    assert seen == [(4, *model.input_shape)] * 5  # every view of the whole support set, drawn up front


@pytest.mark.parametrize("name", ["tiny_adam_33", "lite0_meta_adam_64"])
def test_pseudo_queries_are_augmented_in_the_models_own_input_range(name, fashion):
    """Lite0 takes [0, 255] pixels: augmenting them with a [0, 1] range made every pseudo-query black
    (loss stuck at ln K). The default augmentation must clip to the model's metadata range."""
    model = TrainableModel(fixture_model(name))
    low, high = input_range(model.metadata)
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, ways=2, shots=2, seed=5, value_range=(low, high))
    seen = []

    def recording(images, rng, config):
        out = augment(images, rng, config)
        seen.append((config.value_range, float(np.abs(out - images).mean()) / (high - low), float(out.max())))
        return out

    adapt(model, xs, ys, AdaptConfig(policy="last_layer", iterations=2, batch_size=2, augment_views=2),
          augment=recording)
    assert [s[0] for s in seen] == [(float(low), float(high))] * 2
    # an augmentation changes pixels by a fraction of the range, not by the whole range
    assert all(0.0 < change < 0.5 for _, change, _ in seen), seen
    assert max(s[2] for s in seen) > low + 0.5 * (high - low)
    with pytest.raises(ValueError, match="differs from the model's input range"):
        adapt(model, xs, ys, AdaptConfig(policy="last_layer", iterations=1, augment=AugmentConfig(
            value_range=(float(low), float(low) + (high - low) / 255.0))))


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda x, y: (x[:0], y[:0]), "empty"),
        (lambda x, y: (x, np.zeros_like(y)), "class"),
        (lambda x, y: (np.where(np.arange(x.shape[0])[:, None, None, None] == 1, np.nan, x).astype(np.float32), y), "NaN"),
        (lambda x, y: (x * 3.0, y), "lie in"),
        (lambda x, y: (x, y + 1), "0..K-1"),
        (lambda x, y: (x[:, :-1], y), "images must be"),
    ],
    ids=["empty", "one-class", "nan", "range", "label-gap", "shape"],
)
def test_bad_support_sets(model, fashion, mutate, match):
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, ways=2, shots=2, seed=6)
    with pytest.raises(ValueError, match=match):
        adapt(model, *mutate(xs, ys), AdaptConfig(policy="last_layer", iterations=1))


@pytest.mark.parametrize(
    "kwargs, match",
    [({"policy": "magic"}, "unknown policy"), ({"memory_bytes": -1.0}, "memory_bytes"),
     ({"compute_fraction": -0.1}, "compute_fraction"), ({"iterations": -1}, "iterations"),
     ({"batch_size": 0}, "batch_size"), ({"learning_rate": 0.0}, "learning_rate"),
     ({"epochs": 0}, "epochs must be None or an int >= 1; got 0")],
)
def test_bad_configs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AdaptConfig(**kwargs)


@pytest.mark.parametrize("length, batch_size, support, expected", [
    ({"iterations": 40}, 1, 25, 40),  # a fixed number of steps
    ({"epochs": 40}, 1, 25, 1000),    # the paper's protocol: 40 passes over 25 samples at batch 1
    ({}, 1, 25, 1000),                # the default protocol
    ({"epochs": 2}, 4, 10, 6),        # 2 * ceil(10 / 4)
])
def test_num_steps(length, batch_size, support, expected):
    assert AdaptConfig(**length, batch_size=batch_size).num_steps(support) == expected


def test_epochs_run_passes_over_the_support_set(model, fashion):
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, seed=3)
    result = adapt(model, xs, ys, AdaptConfig(policy="last_layer", epochs=2, batch_size=3))
    assert len(result.losses) == 2 * -(-len(xs) // 3)


def test_fisher_subset_is_class_balanced_and_seeded():
    from tflite_train.runtime.adaptation.trainer import fisher_subset

    labels = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2], np.int32)
    assert fisher_subset(labels, None, 0).tolist() == list(range(9))
    assert fisher_subset(labels, 20, 0).tolist() == list(range(9))
    chosen = fisher_subset(labels, 5, 3)
    assert chosen.size == 5 and np.array_equal(chosen, np.sort(chosen))
    assert np.bincount(labels[chosen], minlength=3).tolist() == [2, 2, 1]  # round-robin over classes 0, 1, 2
    assert np.array_equal(chosen, fisher_subset(labels, 5, 3))
    with pytest.raises(ValueError, match="fisher_samples"):
        AdaptConfig(fisher_samples=0)
