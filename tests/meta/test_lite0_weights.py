"""The Lite0 weights run's config checks and its selection table (no training here)."""

import dataclasses

import pytest

from tflite_train.meta.lite0_weights import Candidate, Lite0WeightsConfig, evaluation_markdown


def test_config_is_validated():
    config = Lite0WeightsConfig()
    assert config.features.first_block == min(c.first_block for c in config.candidates)
    with pytest.raises(ValueError, match="candidates must not be empty"):
        dataclasses.replace(config, candidates=())
    with pytest.raises(ValueError, match=r"features.first_block \(10\) must be the candidates' smallest first_block \(13\)"):
        dataclasses.replace(config, candidates=(Candidate("bn", 13, 1e-3),))
    with pytest.raises(ValueError, match="sweep.keep_best must be False"):
        dataclasses.replace(config, sweep=dataclasses.replace(config.sweep, keep_best=True))
    with pytest.raises(ValueError, match=r"alphas must be in \(0, 1\]"):
        dataclasses.replace(config, alphas=(0.0, 1.0))
    with pytest.raises(ValueError, match="trained must be one of"):
        Candidate("all", 10, 1e-3)
    with pytest.raises(ValueError, match="sources must name >= 2 distinct data sets"):
        dataclasses.replace(config, sources=("emoji", "emoji"))
    with pytest.raises(ValueError, match="features.entries lacks fonts/train, fonts/val"):
        dataclasses.replace(config, sources=("emoji", "fonts"))


def test_default_holds_out_each_of_three_sources():
    config = Lite0WeightsConfig()
    assert config.sources == ("emoji", "glyphs_multiscript", "icon_themes")
    entries = {(name, split) for name, split, _, _ in config.features.entries}
    assert {(s, split) for s in config.sources for split in ("train", "val")} <= entries


def _pct(mean):
    return {"mean": mean, "ci95": 1.0, "tasks": 10}


def test_evaluation_markdown_lists_each_candidate_and_alpha_at_its_best_step():
    row = lambda c, a, t, e, g: {"candidate": c, "alpha": a, "step": t, "score": (e + g) / 2,  # noqa: E731
                                 "per_held_out": {"emoji": e, "glyphs": g}}
    summary = {
        "input": {"shape": [128, 128, 3]},
        "chosen": {"trained": "bn", "first_block": 10, "learning_rate": 1e-3, "alpha": 0.5, "steps": 20,
                   "lodo_score": 0.9, "per_held_out": {"emoji": 0.85, "glyphs": 0.95}},
        "validation": {k: {"emoji": _pct(90.0)} for k in ("imagenet_only", "meta_trained", "paired_delta")},
        "targets_none_policy": {"tuxpaint": {"5way5shot": {k: _pct(80.0) for k in ("imagenet_only", "meta_trained", "paired_delta")}}},
        "eval_tasks": 10, "eval_seed": 1,
        "lodo_table": [row("bn b10", 0.5, 0, 0.8, 0.9), row("bn b10", 0.5, 10, 0.84, 0.92), row("bn b10", 0.5, 20, 0.85, 0.95),
                       row("bn b10", 1.0, 10, 0.86, 0.90), row("bn b10", 1.0, 20, 0.87, 0.85)],
        "seconds": {"features": 1, "selection": 2, "final": 3},
    }
    text = evaluation_markdown(summary)
    assert "trained bn, blocks ≥ b10 and the head conv, learning rate 0.001, 20 steps, WiSE-FT alpha 0.5" in text
    assert "| bn b10 | 0.5 | 20 | 90.00 | 85.00 | 95.00 |" in text
    assert "| bn b10 | 1 | 10 | 88.00 | 86.00 | 90.00 |" in text
    assert text.count("| bn b10 |") == 2
