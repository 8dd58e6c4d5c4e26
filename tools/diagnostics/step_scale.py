"""How far one Adam step moves each candidate layer's kernel, relative to the kernel's own scale.

Adam's update of a weight is lr * m_hat / (sqrt(v_hat) + eps): about ``lr`` in absolute terms whatever the
gradient's scale (exactly ``lr`` on the first step, sign(g) * lr). A layer whose kernel has the root mean
square ``rms`` therefore moves by about ``lr / rms`` of its scale per step, and one learning rate moves
layers of very different scales by very different relative amounts. On EfficientNet-Lite0 the folded
batch-norm leaves the 1x1 expand kernels ~30-40x smaller than the depthwise kernels, so a rate that lets
the depthwise layers move at all rewrites the expand layers, and a rate gentle on the expand layers leaves
the depthwise layers where they were (issue 28: SparseUpdate, which selects depthwise layers only,
changes no query prediction on most line_icons tasks at its tuned 1e-3).

    python -m tools.diagnostics.step_scale --model M.tflite [--learning-rates 3e-4 1e-3 3e-3] [--out bench/results/STEP_SCALE.md]

Numpy and an interpreter only (the kernels are read from the model's state after ``reset_state``).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Mapping, Sequence

import numpy as np

from bench.table_output import emit, markdown_table

__all__ = ["LayerScale", "layer_scales", "main", "render"]


@dataclasses.dataclass(frozen=True)
class LayerScale:
    """One candidate layer's kernel scale.

    Attributes:
      name: The candidate layer.
      shape: Its kernel's shape (output channel last; depthwise [k, k, C]).
      rms: sqrt(mean(w^2)) over the kernel.
    """

    name: str
    shape: tuple[int, ...]
    rms: float

    def relative_step(self, learning_rate: float) -> float:
        """lr / rms: the first Adam step's size relative to the kernel's scale."""
        return learning_rate / self.rms if self.rms > 0 else float("inf")


def layer_scales(kernels: Mapping[str, np.ndarray]) -> list[LayerScale]:
    """``LayerScale`` of each kernel, in the mapping's order (pure)."""
    return [LayerScale(name, tuple(int(s) for s in w.shape), float(np.sqrt(np.mean(np.square(w, dtype=np.float64)))))
            for name, w in kernels.items()]


def render(model: str, scales: Sequence[LayerScale], learning_rates: Sequence[float], command: str = "") -> str:
    """A Markdown table: layer, shape, kernel RMS and lr / RMS per learning rate (``command``: how to regenerate it)."""
    lines = ["# One Adam step relative to each candidate kernel's scale (`tools/diagnostics/step_scale.py`)", "",
             f"Model: `{model}`. Adam moves every weight by about lr per step (exactly lr on the first), so a "
             "layer moves by about lr / RMS of its scale per step." + (f" Command: `{command}`." if command else ""), "",
             *markdown_table(("layer", "kernel shape", "RMS", *(f"lr {lr:g}: lr / RMS" for lr in learning_rates)),
                             ([s.name, "x".join(map(str, s.shape)), f"{s.rms:.4f}",
                               *(f"{s.relative_step(lr):.2%}" for lr in learning_rates)] for s in scales))]
    if scales:
        low, high = min(scales, key=lambda s: s.rms), max(scales, key=lambda s: s.rms)
        lines += ["", f"Largest / smallest kernel RMS: {high.name} {high.rms:.4f} / {low.name} {low.rms:.4f} = "
                  f"{high.rms / low.rms:.1f}x: one learning rate moves {low.name} {high.rms / low.rms:.1f}x further, "
                  "relative to its scale, than it moves " + high.name + "."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Adam's step relative to each candidate kernel's scale")
    parser.add_argument("--model", required=True, help="an exported .tflite")
    parser.add_argument("--learning-rates", type=float, nargs="+", default=[3e-4, 1e-3, 3e-3])
    parser.add_argument("--out", help="write the Markdown table here (default: print it)")
    args = parser.parse_args(argv)
    from tflite_train.runtime import TrainableModel
    from tflite_train.runtime.adaptation.trainer import candidate_weights

    model = TrainableModel(args.model, num_threads=1)
    model.reset_state()
    command = "python -m tools.diagnostics.step_scale " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(args.model, layer_scales(candidate_weights(model)), args.learning_rates, command)
    emit(text, args.out)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    raise SystemExit(main())
