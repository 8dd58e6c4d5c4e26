"""The CLI parses, calls the library and reports errors as exit code 2 with a message."""

import subprocess
import sys

from tflite_train.cli import main


def test_cost_report_prints_paper_rows(capsys):
    assert main(["cost-report"]) == 0
    out = capsys.readouterr().out
    for method in ("FullTrain", "LastLayer", "SparseUpdate", "TinyTrain"):
        assert method in out
    assert "2.03/   2.03" in out  # LastLayer, Adam: cost model equals the paper


def test_backbones_totals(capsys):
    assert main(["backbones", "--backbone", "mcunet", "--totals-only"]) == 0
    assert "42 layers, 14 blocks, 0.463M conv weights, 22.45M MACs" in capsys.readouterr().out


def test_bad_input_size_is_a_clear_error(capsys):
    assert main(["backbones", "--backbone", "mcunet", "--input-size", "8"]) == 2
    assert "input_size must be >= 32" in capsys.readouterr().err


def test_unknown_backbone_rejected_by_parser():
    proc = subprocess.run([sys.executable, "-m", "tflite_train.cli", "backbones", "--backbone", "vgg"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice: 'vgg'" in proc.stderr
