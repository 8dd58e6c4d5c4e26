"""The committed Java golden vectors are exactly what the generator writes today (TF-free)."""

import json
import pathlib

import numpy as np
import pytest

from tflite_train.cli import main
from tools.golden import CASES, DEFAULT_OUT, cost_vectors, metadata_example, render_vectors
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


def test_selection_vectors_cover_the_brief():
    from tools.golden.selection_vectors import SELECTION_BACKBONES, selection_vectors

    assert set(SELECTION_BACKBONES) == {"mcunet", "mbv2", "proxyless", "tiny"}
    data = json.loads(json.dumps(selection_vectors("tiny")))
    cases = data["cases"]
    assert {c["policy"] for c in cases} == {"none", "last_layer", "full_train", "sparse_update", "tinytrain"}
    assert {c.get("criterion") for c in cases} >= {"tinytrain", "fisher", "fisher_memory", "fisher_compute", "l2"}
    assert {c.get("channel_ratio") for c in cases} >= {0.5, 0.25, 0.125}
    assert any(c.get("error") == "BudgetError" for c in cases)
    assert any(c.get("budget_label") == "nothing_empty" and c["layers"] == [] for c in cases)
    # exact fit: the known selection (first two ranked layers) fits its own cost, one byte less does not
    exact = [c for c in cases if c.get("budget_label") == "exact"]
    assert exact and all(set(c["ranking"][:2]) <= set(c["layers"]) for c in exact)
    assert all(c["cost"]["total_bytes"] <= c["budget"]["memory_bytes"] for c in exact)
    # every tinytrain Fisher-channel case picks the top-K Fisher channels of its dict
    for c in cases:
        if c["policy"] == "tinytrain" and c.get("channel_method") == "fisher" and c.get("layers"):
            name = c["layers"][0]
            delta = np.asarray(data["fisher"][c["fisher"]][name])
            k = len(c["channels"][name])
            assert sorted(c["channels"][name]) == sorted(np.argsort(-delta, kind="stable")[:k].tolist())


def test_synthetic_weights_formula():
    from tools.golden.selection_vectors import synthetic_weights

    w = synthetic_weights(3, 2, 4, seed=7)
    j = np.arange(8)
    expected = ((j * 2654435761 + 3 * 40503 + 7 * 97) % 2001 - 1000) / 1024.0
    assert w.shape == (2, 4) and np.array_equal(w.ravel(), expected)
