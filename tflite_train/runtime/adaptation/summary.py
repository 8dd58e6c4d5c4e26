"""Human-readable results of ``adapt`` and ``predict`` (the CLI prints them; ``--json`` prints the record).

Every name that comes from the user's files (class folders, image paths) goes through
``text.printable``, so a name cannot break or forge a line. Plain functions of the report dicts.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from tflite_train.runtime.text import printable
from tflite_train.sparse.units import format_bytes, format_count

MAX_LISTED_CLASSES = 8


def _against(used: float, limit: float | None, fmt) -> str:
    if limit is None or math.isinf(limit):
        return f"{fmt(used)} (no budget)"
    share = 100 * used / limit if limit > 0 else math.inf
    verdict = "within" if used <= limit else "OVER"
    return f"{fmt(used)} of {fmt(limit)} budget ({share:.0f} %, {verdict})"


def _macs(value: float) -> str:
    return format_count(value) + " MACs"


def _raised(before: float | None, limit: float | None, fmt) -> str:
    """", the default raised from X to admit a layer" when the default budget raised this bound, else ""."""
    if before is None or limit is None or limit <= before:
        return ""
    return f"; the default, raised from the paper's {fmt(before)} to admit a layer"


def loss_ends(losses: Sequence[float]) -> tuple[float, float, int] | None:
    """(mean of the first k losses, mean of the last k, k) with k = max(1, len // 10); None if no steps."""
    if not losses:
        return None
    k = max(1, len(losses) // 10)
    return sum(losses[:k]) / k, sum(losses[-k:]) / k, k


def format_cache(cache: Mapping[str, Any] | None) -> str:
    """The cached cut line of the summary (``AdaptResult.cache``); empty when nothing trained."""
    if not cache:
        return ""
    if not cache["used"]:
        return f"not used: {cache['reason']}"
    return (f"steps from the activation below {printable(str(cache['layer']))}: {format_bytes(cache['cache_bytes'])} "
            f"(the views as images: {format_bytes(cache['image_bytes'])}); forward per step "
            f"{format_count(cache['step_forward_macs'])} MACs")


def format_updates(updates: Mapping[str, Any] | None, choice: Mapping[str, Any] | None) -> str:
    """The fine-tuning line of the summary (``AdaptResult.updates`` and ``rate_choice``); empty without training."""
    if not updates:
        return ""
    how = (f"accumulated over {updates['batch']} image(s)" if updates["mode"] == "accumulate"
           else f"batches of {updates['batch']}")
    line = f"{how}, prototypes {updates['prototype_mode']}"
    if choice:
        line += f"; learning rate {choice['rate']:g} chosen for this task ({printable(choice['reason'])})"
    if updates.get("note"):
        line += f"; {printable(updates['note'])}"
    return line


def format_continued(continued: Mapping[str, Any] | None) -> str:
    """The ``--from`` line of the summary (the report's ``continued_from``); empty for a run from the export."""
    if not continued:
        return ""
    new = [printable(n) for n in continued["new_classes"]]
    listed = ", ".join(new[:MAX_LISTED_CLASSES]) + (", ..." if len(new) > MAX_LISTED_CLASSES else "")
    line = (f"{printable(str(continued['checkpoint']))}: {len(continued['classes'])} classes + {len(new)} new"
            + (f" ({listed})" if new else ""))
    if continued.get("selection_from"):
        cut = printable(str(continued["selection_from"]))
        line += (f"; trained on {continued['replayed']} replayed example(s) too; layers from {cut} up only (the "
                 "replay memory's cut: the layers below it made the stored activations and stay frozen)")
    else:
        line += "; no replay memory: classes without new images keep their stored prototypes"
    return line


def format_replay(memory: Mapping[str, Any] | None) -> str:
    """The replay-memory line of the summary (the report's ``replay_memory``); empty for older reports."""
    if not memory:
        return ""
    if not memory["examples"]:
        return f"none kept ({printable(str(memory.get('reason', '')))})"
    rows = memory.get("rows")  # reports before the views were stored have no row count
    views = f", {rows} activations with their views" if isinstance(rows, int) and rows > memory["examples"] else ""
    return (f"{memory['examples']} example(s){views} at the cut {printable(str(memory['cut']))}: "
            f"{format_bytes(memory['bytes'])} of {format_bytes(memory['budget'])} budget  [class-balanced, most "
            "recent first]")


def format_adapt_summary(report: Mapping[str, Any]) -> str:
    """The few lines a user reads after ``adapt`` (from ``adapt_job.run_adaptation``'s report)."""
    names = [printable(n) for n in report["classes"]]
    shots = report.get("shots") or [None] * len(names)
    listed = ", ".join(f"{n} ({s})" for n, s in zip(names[:MAX_LISTED_CLASSES], shots))
    if len(names) > MAX_LISTED_CLASSES:
        listed += f", ... ({len(names) - MAX_LISTED_CLASSES} more)"
    channels = report["selection"]["channels"]
    layer_info = report.get("layer_costs", {})
    layers = ", ".join(f"{layer} {len(c)}/{layer_info.get(layer, {}).get('out_channels', '?')}" for layer, c in channels.items())
    raised = report.get("raised_from") or {}
    memory, compute = report["budget"]["memory_bytes"], report["compute_limit_macs"]
    lines = [
        f"adapted {printable(str(report['model']))} with policy {report['policy']} on {report['runtime']}",
        f"  classes     {len(names)}: {listed}  [name (shots)]",
    ]
    continued = format_continued(report.get("continued_from"))
    if continued:
        lines.append(f"  from        {continued}")
    shape = report.get("input_shape")
    if shape and shape[2] == 1:
        lines.append(f"  input       {shape[0]}x{shape[1]} grey: colour images are converted (luma, ITU-R BT.601)")
    lines += [
        f"  selection   {len(channels)} layer(s): {layers or 'none (no update)'}  [layer channels/of]",
        f"  memory      {_against(report['memory_bytes'], memory, format_bytes)}"
        + _raised(raised.get("memory_bytes"), memory, format_bytes),
        f"  compute     {_against(report['backward_macs'], compute, _macs)}"
        + _raised(raised.get("compute_limit_macs"), compute, _macs)
        + f"; forward pass {format_count(report['forward_macs'])} MACs",
    ]
    cache_line = format_cache(report.get("cache"))
    if cache_line:
        lines.append(f"  cache       {cache_line}")
    updates_line = format_updates(report.get("updates"), report.get("rate_choice"))
    if updates_line:
        lines.append(f"  updates     {updates_line}")
    ends = loss_ends(report["losses"])
    if ends is None:
        lines.append("  loss        no training steps")
    else:
        lines.append(f"  loss        {ends[0]:.3f} -> {ends[1]:.3f}  [mean of the first/last {ends[2]} of "
                     f"{len(report['losses'])} steps]")
    lines.append(f"  support acc {100 * report['support_accuracy_before']:.1f} % -> "
                 f"{100 * report['support_accuracy_after']:.1f} %  [prototype head before -> after adaptation]")
    if "query_accuracy" in report:
        lines.append(f"  query acc   {100 * report['query_accuracy']:.1f} % on {report['query_size']} images")
    phases = ", ".join(f"{k.replace('_', '+')} {v:.1f}" for k, v in report["seconds"].items())
    peak = "" if report.get("peak_rss_bytes") is None else f"; peak RSS {format_bytes(report['peak_rss_bytes'])}"
    replay = format_replay(report.get("replay_memory"))
    if replay:
        lines.append(f"  replay      {replay}")
    lines.append(f"  time        {report['total_seconds']:.1f} s  [{phases}]{peak}")
    lines.append(f"  checkpoint  {printable(str(report['checkpoint']))} ({format_bytes(report['checkpoint_bytes'])}; "
                 f"with its config and report: tflite-train show)")
    return "\n".join(lines)


def adapt_record(report: Mapping[str, Any]) -> str:
    """The machine-readable record of ``adapt --json``: the whole report as JSON (ASCII, escaped)."""
    return json.dumps(report, indent=2, sort_keys=True, ensure_ascii=True)


Prediction = tuple[str, int, str, float]


def format_predictions(rows: Sequence[Prediction], fmt: str = "table") -> str:
    """``predict``'s output: "table" (aligned columns), "json" (a list of objects) or "csv" (with a header).

    Paths and class names are escaped (``text.printable``) in the table and the CSV; JSON escapes them itself.
    """
    if fmt == "json":
        return json.dumps([{"file": p, "class_id": i, "class": n, "confidence": round(c, 6)} for p, i, n, c in rows],
                          indent=2, ensure_ascii=True)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["file", "class_id", "class", "confidence"])
        writer.writerows([printable(p), i, printable(n), f"{c:.4f}"] for p, i, n, c in rows)
        return buffer.getvalue().rstrip("\n")
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}; known: table, json, csv")
    cells = [("file", "class", "confidence")] + [(printable(p), printable(n), f"{100 * c:.1f} %") for p, _, n, c in rows]
    widths = [max(len(row[k]) for row in cells) for k in range(2)]
    return "\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:>10}" for a, b, c in cells)
