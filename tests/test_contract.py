"""The contract module: its tables are the ones in CONTRACT.md, its version rule, its names."""

from __future__ import annotations

import pathlib

import pytest

from tflite_train import contract as C

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_contract_md_holds_the_tables_rendered_from_the_module():
    text = (ROOT / "CONTRACT.md").read_text(encoding="utf-8")
    for table in C.markdown_tables().split("\n\n"):
        assert table.strip() in text, "CONTRACT.md is stale: paste tflite_train.contract.markdown_tables()"


def test_every_signature_takes_an_input():
    io = C.signature_io(["a", "b"], C.state_names(["a", "b"], "adam"), [C.train_variant_name("b")])
    assert set(io) == {*C.SIGNATURE_NAMES, "train_step_b"}
    for name, spec in io.items():
        assert spec["inputs"], name
    assert io["get_state"]["inputs"] == ["dummy"] and io["reset_state"]["inputs"] == ["dummy"]
    assert io["fisher"]["outputs"] == ["a", "b"]
    assert io["set_state"]["inputs"] == io["get_state"]["outputs"] == C.state_names(["a", "b"], "adam")


def test_state_names_order():
    assert C.state_names(["x"], "sgd_momentum") == ["x_kernel", "x_bias", "x_kernel_mom", "x_bias_mom", "x_mask",
                                                    "prototypes", "num_classes", "step", "learning_rate"]
    assert C.layer_state("x", "adam") == ["x_kernel", "x_bias", "x_kernel_m", "x_kernel_v", "x_bias_m", "x_bias_v",
                                          "x_mask"]
    with pytest.raises(C.ContractError, match="optimizer"):
        C.state_names(["x"], "rmsprop")


def test_version_rule():
    C.check_format({"format": "tflite-train", "format_version": 1})
    with pytest.raises(C.ContractError, match="'format_version' is 2, newer .* update the runtime"):
        C.check_format({"format": "tflite-train", "format_version": 2})
    with pytest.raises(C.ContractError, match="'format_version' is 0.*re-export"):
        C.check_format({"format": "tflite-train", "format_version": 0})
    with pytest.raises(C.ContractError, match="'format' is 'other'"):
        C.check_format({"format": "other", "format_version": 1})
    with pytest.raises(C.ContractError, match="JSON object"):
        C.check_format([])


def test_required_fields_are_documented_top_level_fields():
    assert set(C.REQUIRED_FIELDS) <= {f.path for f in C.METADATA_FIELDS}
    assert all("." not in f for f in C.REQUIRED_FIELDS)
