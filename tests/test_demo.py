"""The demo's budget is the library's one default (``sparse.default_budget``), stated in the same words as
``adapt --help``."""

from __future__ import annotations

import dataclasses
import types

import pytest

from tests.runtime.runtime_fixtures import fixture_model

from tflite_train.demo import DemoConfig, budget_line, demo_budget
from tflite_train.runtime import layer_table
from tflite_train.runtime.model.metadata import read_metadata
from tflite_train.sparse import Budget, default_budget, scaled_memory_budget

DEFINITION = "the paper's 1 MiB for MCUNet at 128 px, scaled by this model's LastLayer backward memory"


def _model(name: str):
    return types.SimpleNamespace(metadata=read_metadata(fixture_model(name)))


def test_default_budget_is_the_librarys():
    assert DemoConfig().memory_bytes is None
    for name in ("lite0_meta_adam_64", "mcunet_adam_35", "tiny_adam_33"):
        model = _model(name)
        table = layer_table(model.metadata)
        expected = default_budget(table, model.metadata["candidates"], compute_fraction=0.15, channel_ratio=0.25,
                                  optimizer=model.metadata["optimizer"]["name"])
        assert demo_budget(DemoConfig(), model) == expected
        if name == "lite0_meta_adam_64":  # the shipped model's: the scaled budget as it is
            assert expected == Budget(scaled_memory_budget(table), compute_fraction=0.15)
    assert demo_budget(DemoConfig(memory_bytes=3 * 2**20), _model("mcunet_adam_35")) == Budget(3 * 2**20,
                                                                                               compute_fraction=0.15)


def test_budget_line_uses_the_words_of_adapt_help(capsys):
    from tflite_train.cli import main

    line = budget_line(DemoConfig(), 4.005 * 2**20)
    assert line.startswith("B_mem 4.005 MiB of backward-pass peak memory") and DEFINITION in line
    assert "scaled" not in budget_line(DemoConfig(memory_bytes=2**20), 2**20)
    with pytest.raises(SystemExit):
        main(["adapt", "--help"])
    assert DEFINITION in " ".join(capsys.readouterr().out.split())


def test_demo_keeps_the_papers_protocol_and_fits_the_time_budget_by_tasks():
    config = DemoConfig()
    assert (config.epochs, config.batch_size, config.ways, config.shots) == (40, 1, 5, 5)  # 1,000 steps a task
    assert config.tasks == 2
    assert dataclasses.asdict(config)["memory_bytes"] is None  # written to demo_config.json as null
