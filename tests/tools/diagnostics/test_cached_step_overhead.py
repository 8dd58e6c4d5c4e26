"""The cached step's decomposition table (``tools.diagnostics.cached_step_overhead.render``), worked by hand."""

import pytest

from tools.diagnostics.cached_step_overhead import Timing, render


def test_render_by_hand():
    timings = [Timing("infer", 0.006), Timing("forward above the cut", 0.002),
               Timing("step, nothing selected", 0.005), Timing("step, one layer: a at 1/4", 0.0062),
               Timing("step, one layer: b at 1/4", 0.0065), Timing("step, the policy's selection", 0.012)]
    text = render("m.tflite", "b12_expand", timings, command="python -m tools.diagnostics.cached_step_overhead --model m.tflite")
    assert "Model: `m.tflite`, cut `b12_expand`. Command: `python -m tools.diagnostics.cached_step_overhead --model m.tflite`." in text
    assert "| infer | 6.00 | 1.00 |" in text and "| step, the policy's selection | 12.00 | 2.00 |" in text
    # 5 / 2 ms = 2.5x; one layer adds 6.2 - 5 = 1.2 to 6.5 - 5 = 1.5 ms
    assert "costs 2.5x the forward above the cut (5.00 vs 2.00 ms)" in text
    assert "One selected layer adds 1.20-1.50 ms." in text
    with pytest.raises(ValueError, match="'infer' row"):
        render("m.tflite", "c", [Timing("forward above the cut", 1.0)])

