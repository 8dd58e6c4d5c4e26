"""The int8 section of ``BENCHMARKS.md`` (``bench.int8_section``'s results in words and one table per run)."""

from __future__ import annotations

from collections.abc import Mapping

from bench.accuracy_report import mean_ci_text as _ci
from bench.int8_section import INT8_ROWS, INT8_TOLERANCE_PP, int8_label
from bench.table_output import markdown_table

__all__ = ["int8_report", "timing_table"]


def int8_report(section: Mapping, lines: list[str]) -> None:
    """Appends the int8 section: per run, file sizes, means and paired int8 − float deltas, the goal."""
    lines += [f"## int8 export (`--quantize {section['mode']}`) against float on the same tasks", "",
              "None and TinyTrain at the accuracy section's chosen settings (not re-tuned) on the int8 export of the "
              "same weights, paired with the float rows of section 1 task by task (`bench/int8_section.py`). "
              f"Goal (issue 27): each average delta int8 − float within ±{INT8_TOLERANCE_PP:g} pp.", ""]
    for key, why in section.get("skipped", {}).items():
        lines += [f"- {key}: not measured: {why}.", ""]
    for run in section["runs"].values():
        summary = run["summary"]
        targets = [t for t in next(iter(summary["means"].values())) if t != "average"]
        size = run["model_bytes"]
        lines += [f"### {run['label']} px: file {size['int8'] / 1e6:.1f} MB int8 vs {size['float'] / 1e6:.1f} MB float "
                  f"({size['int8'] / size['float']:.1%})", ""]
        means = {label: summary["means"][label] for row in INT8_ROWS for label in (row, int8_label(row))}
        table = [[label, *(_ci(m[t]) for t in targets), f"**{_ci(m['average'])}**"] for label, m in means.items()]
        table += [[f"{int8_label(row)} − {row}", *(_ci(delta[t], True) for t in targets),
                   f"**{_ci(delta['average'], True)}**"] for row, delta in summary["deltas"].items()]
        lines += markdown_table(("row", *targets, "average"), table)
        verdict = "**met**" if summary["met"] else "**missed**"
        lines += ["", f"Accuracy goal (|average int8 − float| ≤ {INT8_TOLERANCE_PP:g} pp for None and TinyTrain): "
                  f"{verdict}.", ""]
        if "timing" in run:
            lines += timing_table(run["timing"])


def timing_table(timing: Mapping) -> list[str]:
    """The timing column: float and int8 medians side by side and the speed-up float / int8."""
    task = timing["task"]
    lines = [f"Timing (`bench/int8_timing.py`): one interpreter thread, float and int8 alternated in one process, "
             f"median of {timing['runs']} run(s); `infer` at batch 1; an adaptation = load + `adapt` on a "
             f"{task['ways']}-way task with {task['support']} support images at the chosen settings:", ""]
    infer = timing["infer"]
    table = [["`infer` (ms)", f"{infer['float'] * 1e3:.2f}", f"{infer['int8'] * 1e3:.2f}",
              f"{infer['float'] / infer['int8']:.2f}x"]]
    for label, row in timing["rows"].items():
        f, q = row["float"], row["int8"]
        table.append([f"{label}: adaptation (s)", f"{f['end_to_end']:.2f}", f"{q['end_to_end']:.2f}",
                      f"{f['end_to_end'] / q['end_to_end']:.2f}x"])
        if f["step"] > 0 and q["step"] > 0:  # a row that trains (None's adaptation has no training phase)
            table.append([f"{label}: optimizer step (ms, {f['steps']} steps)", f"{f['step'] * 1e3:.2f}",
                          f"{q['step'] * 1e3:.2f}", f"{f['step'] / q['step']:.2f}x"])
    return lines + markdown_table(("", "float", "int8", "speed-up (float / int8)"), table) + [""]
