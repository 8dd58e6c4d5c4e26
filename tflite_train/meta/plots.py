"""PNG plot of a shipped-weights run: pre-training and meta-training curves from their ``log.jsonl``."""

from __future__ import annotations

import json
import pathlib


def _records(path: pathlib.Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def plot_training(out_dir: str | pathlib.Path, filename: str = "training.png") -> pathlib.Path:
    """Writes ``out_dir/<filename>``: pre-training loss/accuracy per step; meta-training query loss and
    None-policy validation accuracy per episode (from ``pretrain/log.jsonl`` and ``meta/log.jsonl``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = pathlib.Path(out_dir)
    pre, meta = _records(out_dir / "pretrain" / "log.jsonl"), _records(out_dir / "meta" / "log.jsonl")
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    if pre:
        a.plot([r["step"] for r in pre], [r["loss"] for r in pre], label="loss")
        a.plot([r["step"] for r in pre], [r["acc"] for r in pre], label="train accuracy")
    a.set(title="supervised pre-training", xlabel="step")
    a.legend()
    train = [r for r in meta if "loss" in r]
    val = [r for r in meta if "val_acc" in r]
    if train:
        b.plot([r["episode"] for r in train], [r["loss"] for r in train], label="query loss")
    if val:
        b.errorbar([r["episode"] for r in val], [r["val_acc"] for r in val], yerr=[r["val_ci95"] for r in val],
                   marker="o", capsize=3, label="val accuracy (None policy)")
    b.set(title="ProtoNet meta-training", xlabel="episode")
    b.legend()
    fig.tight_layout()
    path = out_dir / filename
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
