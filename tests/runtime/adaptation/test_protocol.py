"""The default adaptation protocol is defined once and used by AdaptConfig, `adapt` without flags and the demo;
once the committed benchmark is a powered run, the protocol is the one its validation chose."""

import json
import pathlib

import pytest

from tflite_train.cli.device_commands import adapt_config
from tflite_train.cli.parser import build_parser
from tflite_train.default_weights import default_lite0_meta_trained
from tflite_train.runtime import DEFAULT_PROTOCOL, AdaptConfig

ROOT = pathlib.Path(__file__).resolve().parents[3]
ADAPT = ["adapt", "--model", "m.tflite", "--support", "photos", "--out", "m.ckpt"]


def _cli(*flags: str) -> AdaptConfig:
    return adapt_config(build_parser().parse_args([*ADAPT, *flags]))


def test_adapt_config_defaults_are_the_protocol():
    config = AdaptConfig()
    assert (config.epochs, config.iterations, config.batch_size, config.compute_fraction, config.learning_rate) == (
        DEFAULT_PROTOCOL.epochs, None, DEFAULT_PROTOCOL.batch_size, DEFAULT_PROTOCOL.compute_fraction,
        DEFAULT_PROTOCOL.learning_rate)
    assert config.num_steps(25) == DEFAULT_PROTOCOL.epochs * 25  # 40 passes at batch 1: 1,000 steps


def test_cli_without_flags_runs_the_protocol_and_help_says_so(capsys):
    assert _cli().to_dict() == AdaptConfig().to_dict()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["adapt", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Without flags it runs the default protocol: 40 passes over the support images at batch 1, " \
           "B_compute 15% of the full backward pass" in text


def test_cli_flags_override_the_protocol():
    steps = _cli("--iterations", "7")
    assert (steps.iterations, steps.epochs, steps.num_steps(25)) == (7, None, 7)
    assert _cli("--epochs", "5").num_steps(10) == 50
    macs = _cli("--compute-macs", "1e6")
    assert (macs.compute_macs, macs.compute_fraction) == (1e6, None)
    assert _cli("--compute-budget", "0.3", "--batch-size", "2", "--learning-rate", "0.01").to_dict() == \
        AdaptConfig(compute_fraction=0.3, batch_size=2, learning_rate=0.01).to_dict()
    for flags, words in ((("--iterations", "3", "--epochs", "2"), "two training lengths"),
                         (("--compute-budget", "0.1", "--compute-macs", "5"), "two compute budgets")):
        with pytest.raises(ValueError, match=words):
            _cli(*flags)


def test_library_iterations_replace_the_protocols_passes_and_two_compute_bounds_are_refused():
    assert AdaptConfig(iterations=3).num_steps(100) == 3
    assert AdaptConfig(epochs=2, batch_size=4).num_steps(10) == 6
    with pytest.raises(ValueError, match="pass compute_fraction=None with compute_macs"):
        AdaptConfig(compute_macs=1e6)
    assert AdaptConfig(compute_macs=1e6, compute_fraction=None).budget.compute_macs == 1e6


def test_demo_uses_the_protocol():
    from tflite_train.demo import DemoConfig

    demo = DemoConfig()
    assert (demo.epochs, demo.batch_size, demo.compute_fraction, demo.learning_rate) == (
        DEFAULT_PROTOCOL.epochs, DEFAULT_PROTOCOL.batch_size, DEFAULT_PROTOCOL.compute_fraction,
        DEFAULT_PROTOCOL.learning_rate)


def test_protocol_is_the_powered_benchmarks_choice():
    """Once bench/results holds a powered run's procedure section (>= 20 validation tasks per target), the
    protocol is the procedure it chose as the default on the weights the default export ships."""
    config_path, results_path = ROOT / "bench/results/config.json", ROOT / "bench/results/results.json"
    config = json.loads(config_path.read_text())
    section = json.loads(results_path.read_text())["sections"].get("procedure", {})
    if config.get("tasks", 0) < 60 or section.get("tasks", 0) < 20:
        pytest.skip(f"the committed benchmark is not a powered run (tasks {config.get('tasks')}, procedure tasks "
                    f"{section.get('tasks')}); `make bench-powered` makes one")
    default = section["runs"]["lite0_128"]["default"]
    assert default["weights"] == ("main" if default_lite0_meta_trained() else "before meta-training")
    fields = section["procedures"][default["procedure"]]["fields"]
    assert (fields["prototype_mode"], fields["batch_mode"], fields["rate_choice"]) == ("fixed", "batch", None)
    assert (DEFAULT_PROTOCOL.epochs, DEFAULT_PROTOCOL.batch_size, DEFAULT_PROTOCOL.learning_rate) == (
        fields["epochs"], fields["batch_size"], fields["learning_rate"])


def test_cli_gives_the_protocols_compute_budget_to_budgeted_policies_only():
    assert _cli("--policy", "sparse_update").compute_fraction == DEFAULT_PROTOCOL.compute_fraction
    for policy in ("none", "last_layer", "full_train"):
        assert _cli("--policy", policy).compute_fraction is None
    assert _cli("--policy", "last_layer", "--compute-budget", "0.2").compute_fraction == 0.2
