"""The train-step profile report: increments and shares computed from the cumulative rows."""

from tools.diagnostics.train_step_profile import render

ROWS = [
    {"part": "infer", "signature": "infer", "ms": 4.0},
    {"part": "train_step, nothing selected", "signature": "train_step", "ms": 5.0},
    {"part": "+ a", "signature": "train_step_a", "ms": 7.0},
    {"part": "+ b", "signature": "train_step", "ms": 10.0},
]


def _result(parts, runtime):
    return {"command": "python -m tools.diagnostics.train_step_profile", "runtime": runtime, "rounds": 2, "load": (0.5, 0.7),
            "exports": {"now": ROWS}, "parts": parts}


def test_decompose_only_report_on_tflite_runtime():
    text = render(_result(None, "tflite_runtime.interpreter"))
    assert text.startswith("# Train-step profile: EfficientNet-Lite0@128 TinyTrain step on `tflite_runtime.interpreter` "
                           "with its explicit XNNPACK delegate")
    # increments: the empty step is its own time (5 of 10 ms), then 7 - 5 and 10 - 7.
    assert "| train_step, nothing selected | `train_step` | 5.00 | 5.00 | 50% |" in text
    assert "| + a | `train_step_a` | 7.00 | 2.00 | 20% |" in text
    assert "| + b | `train_step` | 10.00 | 3.00 | 30% |" in text
    assert "| infer | `infer` | 4.00 |  |  |" in text
    assert "## 2." not in text


def test_litert_title():
    assert "TinyTrain step on ai-edge-litert\n" in render(_result(None, "ai_edge_litert.interpreter"))
