"""The picture of an adaptation (``adapt --plot FILE.png``): what was selected, under which budget, and the loss.

Three panels from ``adapt_job.run_adaptation``'s report: (1) per candidate layer, its Fisher
potential P_l = sum_o Delta_o (paper Eq. 2; tinytrain only, else the layers' weight counts) and the
score the selection ranks by, s_l = P_l / (|W_l| M_l) relative to the best (Eq. 3), the chosen
layers coloured and labelled with their channel counts; (2) the selection's backward memory
and compute as a share of B_mem and B_compute, with the budget line at 100 %; (3) the training loss
per step and its running mean over one epoch. matplotlib is imported only here, on use.
"""

from __future__ import annotations

import io
import math
import os
import pathlib
from collections.abc import Mapping
from typing import Any

from tflite_train.runtime.checkpoint.checkpoint import write_atomic
from tflite_train.runtime.errors import UserError
from tflite_train.runtime.text import printable


def require_matplotlib() -> None:
    """Raises UserError (with the install command) when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as err:
        raise UserError("--plot needs matplotlib, which is not installed: pip install 'tflite-train[plot]' "
                        "(or pip install matplotlib==3.11.2)") from err


def _running_mean(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value - (values[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


def plot_adaptation(report: Mapping[str, Any], path: str | os.PathLike, *, title: str | None = None) -> pathlib.Path:
    """Draws the adaptation ``report`` into the PNG ``path`` (see the module docstring); returns the path."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    layers = list(report["layer_costs"])
    chosen = report["selection"]["channels"]
    potentials = report.get("fisher_potentials") or {}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), gridspec_kw={"width_ratios": [2.2, 1, 1.6]})

    ax = axes[0]
    if potentials:
        values = [potentials.get(n, 0.0) for n in layers]
        ax.set_ylabel("Fisher potential P_l (Eq. 2)")
    else:
        values = [report["layer_costs"][n]["weights"] for n in layers]
        ax.set_ylabel(f"weights (policy {report['policy']} uses no Fisher)")
    colours = ["tab:orange" if n in chosen else "tab:gray" for n in layers]
    bars = ax.bar(range(len(layers)), values, color=colours)
    if values and min(values) > 0 and max(values) / min(values) > 100:
        ax.set_yscale("log")
    for bar, name in zip(bars, layers):
        if name in chosen:
            ax.annotate(f"{len(chosen[name])}/{report['layer_costs'][name]['out_channels']}",
                        (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=8)
    if potentials:  # the ranking: s_l = P_l / (|W_l| M_l) up to constant factors (Eq. 3)
        costs = report["layer_costs"]
        scores = [potentials.get(n, 0.0) / max(1, costs[n]["weights"] * costs[n]["forward_macs"]) for n in layers]
        top = max(scores) or 1.0
        twin = ax.twinx()
        twin.plot(range(len(layers)), [v / top for v in scores], "k.", label="score s_l (Eq. 3), relative")
        twin.set_ylim(0, 1.15)
        twin.set_ylabel("score s_l / max (Eq. 3)")
        twin.legend(loc="upper left", fontsize=8)
    ax.set_xticks(range(len(layers)), layers, rotation=60, ha="right", fontsize=7)
    ax.set_title("candidate layers: taken by score s_l while within budget (orange; label: channels)", fontsize=10)

    ax = axes[1]
    memory_limit = report["budget"]["memory_bytes"]
    compute_limit = report["compute_limit_macs"]
    shares, labels = [], []
    for name, used, limit in (("memory", report["memory_bytes"], memory_limit),
                              ("compute", report["backward_macs"], compute_limit)):
        if limit is None or math.isinf(limit) or limit <= 0:
            shares.append(0.0)
            labels.append(f"{name}\n(no budget)")
        else:
            shares.append(100 * used / limit)
            labels.append(name)
    ax.bar(labels, shares, color=["tab:blue", "tab:green"])
    ax.axhline(100, color="tab:red", linestyle="--", label="budget")
    for k, share in enumerate(shares):
        ax.annotate(f"{share:.0f} %", (k, share), ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("% of budget")
    ax.set_ylim(0, max(110, *shares) * 1.1)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title("backward-pass cost vs budget", fontsize=10)

    ax = axes[2]
    losses = list(report["losses"])
    if losses:
        epoch = max(1, -(-report["support_size"] // max(1, int(report.get("batch_size", 1)))))
        ax.plot(range(1, len(losses) + 1), losses, color="tab:gray", alpha=0.4, linewidth=0.8, label="per step")
        ax.plot(range(1, len(losses) + 1), _running_mean(losses, epoch), color="tab:purple",
                label=f"running mean ({epoch} steps)")
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("training loss")
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no training steps", ha="center", va="center", transform=ax.transAxes)
    ax.set_title("loss", fontsize=10)
    fig.suptitle(title or f"{printable(pathlib.Path(str(report['model'])).name)}: {report['policy']}, "
                 f"{len(report['classes'])} classes, support accuracy "
                 f"{100 * report['support_accuracy_before']:.0f} % -> {100 * report['support_accuracy_after']:.0f} %",
                 fontsize=11)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    path = pathlib.Path(path)
    write_atomic(path, buffer.getvalue())  # all or nothing, like the checkpoint
    return path
