"""PNG plots of a benchmark run (matplotlib, Agg backend; no display needed)."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping, Sequence


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def accuracy_vs_compute(rows: Sequence[Mapping], path: str | pathlib.Path, title: str) -> pathlib.Path:
    """The paper's Figure 1: average accuracy vs backward MACs, circle area proportional to memory.

    Args:
      rows: {"label", "accuracy" (percent), "backward_macs", "memory_bytes"} per method.
      path: Output PNG.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    biggest = max([r["memory_bytes"] for r in rows] + [1.0])
    floor = min([r["backward_macs"] for r in rows if r["backward_macs"] > 0] + [1e6]) / 10
    for k, row in enumerate(sorted(rows, key=lambda r: r["backward_macs"])):
        size = 60 + 2000 * row["memory_bytes"] / biggest
        x = max(row["backward_macs"], floor) / 1e6
        ax.scatter([x], [row["accuracy"]], s=size, alpha=0.5)
        # neighbours in x alternate above/below so that close points keep readable labels
        ax.annotate(f"{row['label']}\n{row['memory_bytes'] / 2**20:.2f} MiB", (x, row["accuracy"]),
                    textcoords="offset points", xytext=(8, 4 if k % 2 else -18), fontsize=8)
    ax.set_xscale("log")
    ax.margins(x=0.25, y=0.12)
    ax.set_xlabel("backward MACs per sample (M, log; no update plotted at a tenth of the smallest)")
    ax.set_ylabel("average accuracy (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = pathlib.Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def fisher_layers(names: Sequence[str], potentials: Sequence[float], scores: Sequence[float],
                  chosen: Sequence[str], path: str | pathlib.Path, title: str) -> pathlib.Path:
    """Per-layer Fisher potential P_l (Eq. 2) and multi-objective score s_l (Eq. 3); chosen layers marked."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True)
    xs = range(len(names))
    colors = ["tab:red" if n in chosen else "tab:blue" for n in names]
    top.bar(xs, potentials, color=colors)
    top.set_ylabel("Fisher potential P_l")
    top.set_yscale("log")
    top.set_title(title, fontsize=10)
    bottom.bar(xs, scores, color=colors)
    bottom.set_ylabel("score s_l (Eq. 3)")
    bottom.set_xticks(list(xs))
    bottom.set_xticklabels(names, rotation=90, fontsize=7)
    top.legend(handles=[plt.Rectangle((0, 0), 1, 1, color="tab:red"), plt.Rectangle((0, 0), 1, 1, color="tab:blue")],
               labels=["selected", "not selected"], fontsize=8)
    fig.tight_layout()
    path = pathlib.Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
