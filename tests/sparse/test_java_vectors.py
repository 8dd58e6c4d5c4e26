"""The committed Java golden vectors are exactly what the generator writes today (TF-free)."""

import json
import pathlib

import pytest

from tflite_train.cli import main
from tflite_train.golden import CASES, DEFAULT_OUT, cost_vectors, metadata_example, render_vectors
from tflite_train.sparse import LayerTable, backward_cost

REPO = pathlib.Path(__file__).resolve().parents[2]
COMMITTED = REPO / DEFAULT_OUT


def test_committed_vectors_are_fresh(tmp_path):
    assert main(["golden", "--out", str(tmp_path)]) == 0
    generated = sorted(p.name for p in tmp_path.iterdir())
    committed = sorted(p.name for p in COMMITTED.iterdir())
    assert generated == committed, "run `tflite-train golden` and commit android_demo/core/src/test/resources/golden"
    for name in generated:
        assert (tmp_path / name).read_text() == (COMMITTED / name).read_text(), f"{name} is stale"


def test_render_is_deterministic():
    assert render_vectors(CASES[:2]) == render_vectors(CASES[:2])


@pytest.mark.parametrize("backbone,size", [("tiny", 13), ("mcunet", 49)])
def test_vectors_agree_with_cost_model(backbone, size):
    data = json.loads(json.dumps(cost_vectors(backbone, size)))
    table = LayerTable.from_list(data["layers"])
    labels = {case["label"] for case in data["backward_cost"]}
    assert {"None", "FullTrain", "LastLayer", "LastTwoBlocks", "Sparse0"} <= labels
    for case in data["backward_cost"]:
        cost = backward_cost(table, case["channels"], optimizer=case["optimizer"], batch_size=case["batch_size"],
                             gradient_buffer=case["gradient_buffer"])
        assert case["expected"]["total_bytes"] == cost.total_bytes
    full = next(c for c in data["backward_cost"] if c["label"] == "FullTrain")
    assert full["expected"]["deepest_layer"] == 0


def test_metadata_example_follows_contract():
    meta = metadata_example()
    assert meta["format"] == "tflite-train" and meta["format_version"] == 1
    flagged = [layer["name"] for layer in meta["layers"] if layer["candidate"]]
    assert meta["candidates"] == flagged and flagged


def test_unknown_backbone_rejected():
    with pytest.raises(ValueError, match="backbone"):
        cost_vectors("resnet", 128)
