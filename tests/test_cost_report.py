"""selection_report: the multi-backbone backward-cost rows made by the real selection policies."""

import pytest

from tflite_train.architectures import build_layer_table
from tflite_train.cost_report import selection_report, synthetic_fisher
from tflite_train.sparse import full_backward_macs

MIB = 2**20


@pytest.mark.parametrize("backbone", ["mcunet", "mbv2", "proxyless"])
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_rows_and_budget(backbone, optimizer):
    rows = {r.method: r for r in selection_report(backbone, optimizer=optimizer)}
    assert list(rows) == ["FullTrain", "LastLayer", "SparseUpdate", "TinyTrain"]
    assert rows["FullTrain"].batch_size == 100 and rows["TinyTrain"].batch_size == 1
    tiny = rows["TinyTrain"].cost
    table = build_layer_table(backbone, 128)
    assert 0 < tiny.total_bytes <= MIB and tiny.backward_macs <= 0.15 * full_backward_macs(table)
    assert rows["FullTrain"].cost.backward_macs > rows["TinyTrain"].cost.backward_macs


def test_mcunet_last_layer_matches_paper_table6():
    # LastLayer updates b13_project: (92,160 weights + 160 biases) x 4 B = 0.35 MiB; total 2.03 MiB (Table 6)
    row = next(r for r in selection_report("mcunet") if r.method == "LastLayer")
    assert row.cost.updated_weight_bytes == (92160 + 160) * 4
    assert row.cost.total_bytes / MIB == pytest.approx(row.paper.total_mib, abs=0.01)


def test_measured_fisher_drives_tinytrain():
    table = build_layer_table("mcunet", 128)
    fisher = {n: v * 0 for n, v in synthetic_fisher(table).items()}
    fisher["b13_expand"][:] = 1.0  # only this layer has any Fisher potential
    row = next(r for r in selection_report("mcunet", fisher=fisher) if r.method == "TinyTrain")
    assert "b13_expand" in row.description and "measured" in row.description
