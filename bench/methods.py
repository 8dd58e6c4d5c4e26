"""The adaptation methods of the accuracy, timing and ablation sections, as ``Method`` rows."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from bench.config import BenchConfig
from bench.policy_runs import Method, sparse_update_layers
from tflite_train.runtime import AdaptConfig

TINYTL_NOTE = "TinyTL (lite residual modules) is not built in this project: no row can be measured."


def _base(config: BenchConfig, memory_bytes: float, **overrides) -> AdaptConfig:
    fields = dict(policy="tinytrain", memory_bytes=memory_bytes, compute_fraction=config.compute_fraction,
                  channel_ratio=config.channel_ratio, iterations=config.iterations, batch_size=1,
                  learning_rate=config.learning_rate, seed=config.seed, on_empty="empty")
    fields.update(overrides)
    return AdaptConfig(**fields)


def accuracy_methods(config: BenchConfig, memory_bytes: float, candidates: Sequence[str]) -> list[Method]:
    """Table 1's rows: None, LastLayer, FullTrain, TinyTL (not built), SparseUpdate, TinyTrain.

    SparseUpdate is MIT's static layer list (all layers, unbounded budget as in the paper's 1.43 MB
    row) when the backbone has one, else the static Fisher ranking under the TinyTrain budget.
    """
    mit = sparse_update_layers(config, candidates)
    sparse_update = _base(config, math.inf if mit else memory_bytes, policy="sparse_update",
                          compute_fraction=None if mit else config.compute_fraction,
                          channel_ratio=config.sparse_update_channel_ratio, sparse_update_layers=mit)
    return [
        Method("None", "sparse", _base(config, math.inf, policy="none", compute_fraction=None)),
        Method("LastLayer", "sparse", _base(config, math.inf, policy="last_layer", compute_fraction=None)),
        Method("FullTrain", "full", _base(config, math.inf, policy="full_train", compute_fraction=None,
                                          batch_size=config.full_train_batch)),
        Method("TinyTL", "sparse", None),
        Method("SparseUpdate", "sparse", sparse_update),
        Method("TinyTrain", "sparse", _base(config, memory_bytes)),
    ]


PROTOCOL_SUFFIX = ", Table 8 protocol"


def timing_methods(config: BenchConfig, memory_bytes: float, candidates: Sequence[str],
                   support_size: int) -> list[Method]:
    """Table 8's rows.

    As in the accuracy section: FullTrain at its batch and at batch 1, SparseUpdate, TinyTrain
    (``iterations`` steps of batch 1). Then the paper's Table 8 protocol ("training using all the
    samples (e.g. 25) for 40 iterations"): ``iterations`` passes over the ``support_size`` support
    images, i.e. iterations * support_size steps of batch 1 (the selection is unchanged), for
    FullTrain, SparseUpdate and TinyTrain.
    """
    rows = {m.label: m for m in accuracy_methods(config, memory_bytes, candidates)}
    full = rows["FullTrain"]
    out = [dataclasses.replace(full, label=f"FullTrain (batch {config.full_train_batch})")]
    full_1 = Method("FullTrain (batch 1)", "full", dataclasses.replace(full.adapt, batch_size=1))
    if config.full_train_batch != 1:
        out.append(full_1)
    out += [rows["SparseUpdate"], rows["TinyTrain"]]
    steps = config.iterations * support_size
    for method in (full_1, rows["SparseUpdate"], rows["TinyTrain"]):
        out.append(Method(method.label.replace(" (batch 1)", "") + PROTOCOL_SUFFIX, method.model,
                          dataclasses.replace(method.adapt, iterations=steps)))
    return out


def ablation_methods(config: BenchConfig, memory_bytes: float, has_pretrained: bool) -> dict[str, list[Method]]:
    """Table 3 / Figure 5 groups: layer criteria, channel methods x ratios, meta-training on/off."""
    criteria = [Method(f"criterion {c}", "sparse", _base(config, memory_bytes, criterion=c))
                for c in ("tinytrain", "fisher", "fisher_memory", "fisher_compute", "l2")]
    channels = [Method(f"channels {m} @ {r:g}", "sparse", _base(config, memory_bytes, channel_method=m, channel_ratio=r))
                for r in config.channel_ratios for m in ("fisher", "random", "l2")]
    meta = [Method("None, meta-trained", "sparse", _base(config, math.inf, policy="none", compute_fraction=None)),
            Method("TinyTrain, meta-trained", "sparse", _base(config, memory_bytes))]
    if has_pretrained:
        meta += [Method("None, pre-trained only", "pretrained", _base(config, math.inf, policy="none", compute_fraction=None)),
                 Method("TinyTrain, pre-trained only", "pretrained", _base(config, memory_bytes))]
    return {"criteria": criteria, "channels": channels, "meta_training": meta}
