"""BenchConfig validation and the models a Lite0 run exports."""

import dataclasses

import pytest

from bench import BenchConfig


@pytest.mark.parametrize("field, value", [("tasks", 1), ("sections", ("nope",)), ("channel_ratio", 1.5),
                                          ("iterations", -1), ("channel_ratios", ()), ("epochs", 0),
                                          ("workers", 0), ("train_variants", -1), ("learning_rates", ()), ("learning_rates", (1e-3, -1.0)),
                                          ("epochs_grid", ()), ("epochs_grid", (0,)), ("validation_fraction", 1.0),
                                          ("backbones", ()), ("halving_rounds", (2, 2)), ("halving_rounds", (0,)),
                                          ("halving_eta", 1)])


def test_config_validation(field, value):
    with pytest.raises(ValueError, match=field):
        BenchConfig(**{field: value})


def test_lite0_run_exports_imagenet_as_baseline_and_meta_weights_when_given(tmp_path):
    from bench.config import IMAGENET, LITE0_128
    from bench.models import run_export_configs

    shipped = run_export_configs(LITE0_128, 4)
    assert shipped["sparse"].weights == "weights/efficientnet_lite0/lite0_128_meta.weights.h5"
    assert shipped["baseline"].weights == "imagenet"
    alone = run_export_configs(dataclasses.replace(LITE0_128, weights=IMAGENET), 4)
    assert set(alone) == {"sparse", "full"} and alone["sparse"].weights == "imagenet"
    assert (alone["sparse"].candidates, alone["full"].candidates) == ("blocks:6", "all")
    weights = tmp_path / "lite0_meta.weights.h5"
    with pytest.raises(ValueError, match="lite0_meta.weights.h5.*not found"):
        run_export_configs(dataclasses.replace(LITE0_128, weights=str(weights)), 4)
    weights.write_bytes(b"")  # only its path matters here (no export)
    both = run_export_configs(dataclasses.replace(LITE0_128, weights=str(weights)), 4)
    assert (both["sparse"].weights, both["baseline"].weights) == (str(weights), "imagenet")
