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


def accuracy_vs_cost(panels: Sequence[tuple[str, Sequence[Mapping]]], path: str | pathlib.Path,
                     title: str) -> pathlib.Path:
    """Accuracy against the cost of an adaptation: one row of two panels per target (and the average).

    Left: seconds per adaptation (log); right: backward MACs per optimizer step (log; no update is
    plotted at a tenth of the smallest). One point per policy, its 95 % CI as a vertical error bar
    (drawn within 0-100 %); a policy keeps its colour and marker in every panel.

    Args:
      panels: (title, rows) per row of panels; a row is {"label", "accuracy" (%), "ci95" (%),
        "seconds" (per adaptation), "macs_per_step"} per policy.
      path: Output PNG.
      title: Figure title.
    """
    plt = _pyplot()
    labels = list(dict.fromkeys(r["label"] for _, rows in panels for r in rows))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = "osD^vP*Xh<>"
    style = {label: (colors[k % len(colors)], markers[k % len(markers)]) for k, label in enumerate(labels)}
    macs = [r["macs_per_step"] for _, rows in panels for r in rows if r["macs_per_step"] > 0]
    floor = min(macs + [1e6]) / 10
    fig, axes = plt.subplots(len(panels), 2, figsize=(10, 2.8 * len(panels) + 0.9), squeeze=False, layout="constrained")
    for (name, rows), (left, right) in zip(panels, axes):
        low = min([r["accuracy"] - r["ci95"] for r in rows] + [100.0])
        high = max([r["accuracy"] + r["ci95"] for r in rows] + [0.0])
        for row in rows:
            color, marker = style[row["label"]]
            y = row["accuracy"]
            error = [[y - max(0.0, y - row["ci95"])], [min(100.0, y + row["ci95"]) - y]]
            for ax, x in ((left, row["seconds"]), (right, max(row["macs_per_step"], floor) / 1e6)):
                ax.errorbar([x], [y], yerr=error, fmt=marker, color=color, capsize=3, markersize=6)
        for ax in (left, right):
            ax.set_xscale("log")
            ax.set_ylim(max(0.0, low) - 2, min(100.0, high) + 2)
            ax.grid(alpha=0.3)
            ax.margins(x=0.15)
            ax.set_ylabel("accuracy (%)")
        left.set_title(f"{name}: vs seconds per adaptation", fontsize=9)
        right.set_title(f"{name}: vs backward MACs per step", fontsize=9)
    axes[-1][0].set_xlabel("seconds per adaptation (log)")
    axes[-1][1].set_xlabel("backward MACs per step (M, log; no update at 1/10 of the least)")
    handles = [plt.Line2D([], [], color=style[label][0], marker=style[label][1], linestyle="", label=label)
               for label in labels]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(4, len(labels)), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    path = pathlib.Path(path)
    fig.savefig(path, dpi=110)
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


def delta_vs_seconds(groups: Mapping[str, Sequence[Mapping]], path: str | pathlib.Path, title: str) -> pathlib.Path:
    """Each fine-tuning procedure's paired gain over no training against its seconds per adaptation.

    One point per procedure (annotated with its name), its paired 95 % CI as a vertical error bar; one colour
    per group (a set of weights); a dashed line at 0 (no gain).

    Args:
      groups: Group name -> rows {"label", "delta" (pp), "ci95" (pp), "seconds" (per adaptation, > 0)}.
      path: Output PNG.
      title: Figure title.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.2, 4.6), layout="constrained")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (group, rows) in enumerate(groups.items()):
        for n, row in enumerate(rows):
            ax.errorbar([row["seconds"]], [row["delta"]], yerr=[[row["ci95"]], [row["ci95"]]], fmt="os"[k % 2],
                        color=colors[k % len(colors)], capsize=3, markersize=6, label=group if n == 0 else None)
            ax.annotate(row["label"], (row["seconds"], row["delta"]), textcoords="offset points", xytext=(5, 3),
                        fontsize=7, color=colors[k % len(colors)])
    ax.axhline(0.0, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("seconds per adaptation (one thread, log)")
    ax.set_ylabel("accuracy − no training (pp, paired 95 % CI)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(title, fontsize=10)
    path = pathlib.Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
