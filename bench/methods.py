"""The adaptation methods of the accuracy, timing and ablation sections, as ``Method`` rows."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

from bench.config import BackboneRun, BenchConfig
from bench.models import BASELINE, BASELINE_FULL, FULL, SPARSE, model_key
from bench.policy_runs import Method, compute_budget_macs, sparse_update_layers
from tflite_train.architectures import build_layer_table
from tflite_train.runtime import AdaptConfig
from tflite_train.sparse import SPARSE_UPDATE_CRITERION
from tflite_train.sparse.cost_model import total_forward_macs

TINYTL_NOTE = "TinyTL (lite residual modules) is not built in this project: no row can be measured."


def _method_config(config: BenchConfig, memory_bytes: float, **overrides) -> AdaptConfig:
    length = dict(epochs=config.epochs) if config.epochs is not None else dict(iterations=config.iterations)
    fields = dict(policy="tinytrain", memory_bytes=memory_bytes, compute_fraction=None,
                  compute_macs=compute_budget_macs(config.backbone, config.input_size, config.compute_fraction),
                  channel_ratio=config.channel_ratio, **length, batch_size=1, seed=config.seed, on_empty="empty")
    fields.update(overrides)
    return AdaptConfig(**fields)


def accuracy_methods(config: BenchConfig, memory_bytes: float, candidates: Sequence[str]) -> list[Method]:
    """Table 1's rows: None, LastLayer, FullTrain, TinyTL (not built), SparseUpdate, TinyTrain.

    SparseUpdate is MIT's static layer list (all layers, unbounded budget as in the paper's 1.43 MB
    row) when the backbone has one, else the static ranking of ``SPARSE_UPDATE_CRITERION`` under the
    TinyTrain budget.
    """
    mit = sparse_update_layers(config.backbone, candidates)
    scheme = dict(compute_macs=None) if mit else dict(criterion=SPARSE_UPDATE_CRITERION)  # MIT's list is unbudgeted
    sparse_update = _method_config(config, math.inf if mit else memory_bytes, policy="sparse_update",
                                   channel_ratio=config.sparse_update_channel_ratio, sparse_update_layers=mit,
                                   **scheme)
    return [
        Method("None", "sparse", _method_config(config, math.inf, policy="none", compute_macs=None)),
        Method("LastLayer", "sparse", _method_config(config, math.inf, policy="last_layer", compute_macs=None)),
        Method("FullTrain", "full", _method_config(config, math.inf, policy="full_train", compute_macs=None,
                                                   batch_size=config.full_train_batch)),
        Method("TinyTL", "sparse", None),
        Method("SparseUpdate", "sparse", sparse_update),
        Method("TinyTrain", "sparse", _method_config(config, memory_bytes)),
    ]


WITHOUT_META = " without meta-training"
"""Suffix of a row's label when it runs on the backbone's weights without meta-training."""


def without_meta(label: str) -> str:
    """``label`` on the weights without meta-training, e.g. "TinyTrain without meta-training"."""
    return label + WITHOUT_META


NO_META = without_meta("TinyTrain")
NONE_NO_META = without_meta("None")
PAIRED_POLICIES = ("None", "LastLayer", "FullTrain", "SparseUpdate", "TinyTrain")
"""The paired accuracy section's policies, in report order; a run with meta-trained weights has each of
them again on the weights without meta-training (``without_meta``)."""


def no_update_row(label: str) -> str:
    """The row without training on the same weights as row ``label`` (the no-op check's reference):
    "None without meta-training" for any row without meta-training, else "None"."""
    return NONE_NO_META if label.endswith(WITHOUT_META) else "None"


def paired_methods(config: BenchConfig, run: BackboneRun, memory_bytes: float,
                   candidates: Sequence[str]) -> list[Method]:
    """The paired section's rows for one backbone run (every row on the same tasks).

    None, LastLayer, FullTrain, SparseUpdate and TinyTrain run on the run's meta-trained weights (or its
    baseline weights when it has none); when the run has both, each policy runs again on the weights without
    meta-training (label ``without_meta``; FullTrain from the baseline's every-block export), so that every
    comparison the shipped default's choice rests on is paired on one set of weights.
    B_compute is ``compute_fraction`` of the model's full backward pass (the library's definition,
    ``AdaptConfig.compute_fraction``); B_mem is ``memory_bytes``. SparseUpdate is MIT's static list
    (unbudgeted, the paper's row) when the backbone has one, else the static Fisher ranking of source
    tasks (``SPARSE_UPDATE_CRITERION``, on the row's own weights) under TinyTrain's budgets. Epochs and
    learning rates are placeholders until tuned.
    """
    mit = sparse_update_layers(run.backbone, candidates)
    base = dict(memory_bytes=memory_bytes, compute_fraction=config.compute_fraction, channel_ratio=config.channel_ratio,
                epochs=max(config.epochs_grid), batch_size=1, seed=config.seed, on_empty="empty")
    unbounded = dict(base, memory_bytes=math.inf, compute_fraction=None)
    sparse_update = AdaptConfig(**{**(unbounded if mit else dict(base, criterion=SPARSE_UPDATE_CRITERION)),
                                   "channel_ratio": config.sparse_update_channel_ratio},
                                policy="sparse_update", sparse_update_layers=mit)
    configs = {
        "None": AdaptConfig(**unbounded, policy="none"),
        "LastLayer": AdaptConfig(**unbounded, policy="last_layer"),
        "FullTrain": AdaptConfig(**{**unbounded, "batch_size": config.full_train_batch}, policy="full_train"),
        "SparseUpdate": sparse_update,
        "TinyTrain": AdaptConfig(**base, policy="tinytrain"),
    }
    key = functools.partial(model_key, run)
    rows = [Method(label, key(FULL if label == "FullTrain" else SPARSE), configs[label]) for label in PAIRED_POLICIES]
    if run.meta_trained:
        rows += [Method(without_meta(label), key(BASELINE_FULL if label == "FullTrain" else BASELINE), configs[label])
                 for label in PAIRED_POLICIES]
    return rows


PROTOCOL_SUFFIX = ", Table 8 protocol"
PAPER_EPOCHS = 40
"""The paper's Table 8 protocol: all support samples for 40 iterations (passes)."""


FORWARD_BUDGET_LABEL = "TinyTrain (B_compute of forward MACs)"


def forward_budget_variant(tinytrain: Method, config: BenchConfig) -> Method:
    """TinyTrain under the other reading of "15 % of total MACs": ``compute_fraction`` of the
    forward MACs (about half the default budget, which is relative to FullTrain's backward MACs)."""
    forward = total_forward_macs(build_layer_table(config.backbone, config.input_size))
    return Method(FORWARD_BUDGET_LABEL, tinytrain.model,
                  dataclasses.replace(tinytrain.adapt, compute_macs=config.compute_fraction * forward, compute_fraction=None))


def timing_methods(config: BenchConfig, accuracy_rows: Sequence[Method]) -> list[Method]:
    """Table 8's rows from the accuracy section's ``accuracy_rows`` (their learning rates included).

    As in the accuracy section: FullTrain at its batch and at batch 1, SparseUpdate, TinyTrain, and
    TinyTrain under the forward-MACs compute budget (``forward_budget_variant``). When
    the accuracy section runs fixed ``iterations`` (``config.epochs`` None) rather than the paper's
    passes over the support set, FullTrain (batch 1), SparseUpdate and TinyTrain are timed a second
    time on the paper's Table 8 protocol (``PAPER_EPOCHS`` passes at batch 1).
    """
    rows = {m.label: m for m in accuracy_rows}
    full = rows["FullTrain"]
    out = [dataclasses.replace(full, label=f"FullTrain (batch {config.full_train_batch})")]
    full_1 = Method("FullTrain (batch 1)", "full", dataclasses.replace(full.adapt, batch_size=1))
    if config.full_train_batch != 1:
        out.append(full_1)
    out += [rows["SparseUpdate"], rows["TinyTrain"], forward_budget_variant(rows["TinyTrain"], config)]
    if config.epochs is None:
        for method in (full_1, rows["SparseUpdate"], rows["TinyTrain"]):
            out.append(Method(method.label.replace(" (batch 1)", "") + PROTOCOL_SUFFIX, method.model,
                              dataclasses.replace(method.adapt, epochs=PAPER_EPOCHS)))
    return out


def ablation_methods(config: BenchConfig, memory_bytes: float,
                     learning_rate: float | None = None) -> dict[str, list[Method]]:
    """Table 3 / Figure 5 groups: layer criteria, channel methods x ratios, and the two readings of the
    paper's compute budget (meta-training on/off is a row of the paired accuracy section).

    Every variant trains at ``learning_rate`` (TinyTrain's chosen rate; None = the export's default).
    """
    base = functools.partial(_method_config, config, learning_rate=learning_rate)

    criteria = [Method(f"criterion {c}", "sparse", base(memory_bytes, criterion=c))
                for c in ("tinytrain", "fisher", "fisher_memory", "fisher_compute", "l2")]
    channels = [Method(f"channels {m} @ {r:g}", "sparse", base(memory_bytes, channel_method=m, channel_ratio=r))
                for r in config.channel_ratios for m in ("fisher", "random", "l2")]
    tinytrain = Method("TinyTrain (B_compute of FullTrain's backward MACs)", "sparse", base(memory_bytes))
    budgets = [tinytrain, forward_budget_variant(tinytrain, config)]
    return {"criteria": criteria, "channels": channels, "compute_budget": budgets}
