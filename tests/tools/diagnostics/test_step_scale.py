"""Adam's step relative to each kernel's scale (``tools.diagnostics.step_scale``), worked by hand."""

import numpy as np
import pytest

from tools.diagnostics.step_scale import layer_scales, render


def test_scales_and_relative_steps_by_hand():
    kernels = {"dw": np.full((3, 3, 2), 0.5, np.float32),  # rms 0.5
               "pw": np.array([[[[0.03, -0.04]]]], np.float32)}  # rms sqrt((9 + 16) / 2) * 1e-2 = 0.0353553
    dw, pw = layer_scales(kernels)
    assert (dw.name, dw.shape, dw.rms) == ("dw", (3, 3, 2), pytest.approx(0.5))
    assert pw.rms == pytest.approx(0.0353553, rel=1e-5) and pw.shape == (1, 1, 1, 2)
    assert dw.relative_step(1e-3) == pytest.approx(0.002) and pw.relative_step(1e-3) == pytest.approx(0.0282843, rel=1e-5)
    text = render("m.tflite", [dw, pw], [1e-3], command="python -m tools.diagnostics.step_scale --model m.tflite")
    assert "| dw | 3x3x2 | 0.5000 | 0.20% |" in text and "| pw | 1x1x1x2 | 0.0354 | 2.83% |" in text
    assert "dw 0.5000 / pw 0.0354 = 14.1x: one learning rate moves pw 14.1x further" in text
    assert "Command: `python -m tools.diagnostics.step_scale --model m.tflite`." in text


def test_a_zero_kernel_has_an_unbounded_relative_step():
    (zero,) = layer_scales({"z": np.zeros((1, 1, 2, 2), np.float32)})
    assert zero.rms == 0.0 and zero.relative_step(1e-3) == float("inf")
