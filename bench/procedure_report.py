"""The procedure section of BENCHMARKS.md (``bench.procedure_section``'s results; pure)."""

from __future__ import annotations

from collections.abc import Mapping

from bench.accuracy_report import mean_ci_text
from bench.paired_accuracy import AVERAGE
from bench.procedure_section import BEFORE_META
from bench.procedures import AFFORDABLE_UPDATES
from bench.table_output import markdown_table

__all__ = ["procedure_report"]


def procedure_report(section: Mapping, targets: list[str], lines: list[str]) -> None:
    """Appends the section: the procedures, one table per backbone run, the decisions with their N."""
    n = section["tasks"]
    lines += ["## Fine-tuning procedure (validation tasks only)", "",
              f"TinyTrain under each fine-tuning procedure, beside None, on the first {n} tasks of every target's "
              "validation pool (never reported elsewhere; `bench/procedure_section.py`); deltas are paired on the "
              "same tasks (95 % CIs as in section 1). Procedures (`bench/procedures.py`):", ""]
    lines += [f"- **{name}**: {p['description']}" for name, p in section["procedures"].items()]
    lines.append("")
    for key, run in section["runs"].items():
        table = [[label, *(mean_ci_text(row["accuracy"][t]) for t in targets),
                  f"**{mean_ci_text(row['accuracy'][AVERAGE])}**",
                  mean_ci_text(row["delta_none"][AVERAGE], signed=True) if row["delta_none"] else "-",
                  _updates_text(section["procedures"].get(row["procedure"])), f"{row['seconds']:.2f}",
                  str(row["trained_tasks"])] for label, row in run["rows"].items()]
        header = ("row", *targets, f"**{AVERAGE}**", f"− None ({AVERAGE})", "updates / 25 images", "s / task",
                  "trained tasks")
        lines += [f"### {run['label']}", "", *markdown_table(header, table)]
        cis = [row["delta_none"][AVERAGE]["ci95"] for row in run["rows"].values()
               if row["delta_none"] and row["trained_tasks"]]
        if cis:
            lines += ["", f"What N = {n} tasks per target can show: the average deltas' 95 % CIs here are "
                      f"±{min(cis):.1f}-{max(cis):.1f} pp, so two procedures closer than that are not told apart; the "
                      "decision below follows its rule on the means, and the paired section's test tasks (N >= 60 "
                      "per target) settle what it chose. A row with 0 trained tasks left every task untrained (a no-op)."]
        figure = section.get("figures", {}).get(key)
        if figure:
            lines += ["", "Gain over no training against the cost of one adaptation, per procedure and weights:", "",
                      f"![procedures]({figure})"]
        d = run["decision"]
        other = {w: s for w, s in d["weights_scores"].items() if w != d["weights"]}
        lines += ["", f"**Decision** (N = {n} validation tasks per target, {n * len(targets)} in all): procedure "
                  f"**{d['procedure']}** (best average validation accuracy, {d['scores'][d['procedure']]:.1f} %; ties "
                  "go to the cheaper one); weights: **"
                  + ("before meta-training" if d["weights"] == BEFORE_META else "the run's main weights") + "**"
                  + (f" ({d['weights_scores'][d['weights']]:.1f} % against "
                     + ", ".join(f"{s:.1f} % {w}" for w, s in other.items()) + ")" if other else "") + ".", ""]
        if "default" in run:
            lines += [_default_text(run["default"]), ""]
            test = run["default"].get("test")
            if test:
                deltas = test["delta_none"]
                lines += [f"On the test pool's first {test['tasks']} tasks per target (the paired section's; no "
                          f"decision read them), the default scores **{mean_ci_text(test['accuracy'][AVERAGE])}** "
                          f"against None's {mean_ci_text(test['none'][AVERAGE])}: "
                          f"**{mean_ci_text(deltas[AVERAGE], signed=True)} pp** ("
                          + ", ".join(f"{t} {mean_ci_text(deltas[t], signed=True)}" for t in targets) + ").", ""]


def _updates_text(proc: Mapping | None) -> str:
    """The updates of one adaptation of 25 images, with "(affordable)" under the cost goal."""
    if proc is None:
        return "0"
    if proc.get("updates") is None:
        return "per-task choice"
    return f"{proc['updates']}" + (" (affordable)" if proc.get("affordable") else "")


def _default_text(d: Mapping) -> str:
    """The default decision in words (``bench.procedure_section.choose_default``)."""
    weights = "before meta-training" if d["weights"] == BEFORE_META else "the run's main weights"
    best, cheap, scores = d["best"], d["best_affordable"], d["scores"]
    text = (f"**Default** (`adapt` without flags), on the weights the default export ships ({weights}): the most "
            f"accurate procedure is **{best}** ({scores[best]:.1f} %)")
    if cheap is None:
        return text + "; no procedure here fits the cost goal, so it ships and the cost goal is missed."
    text += (f"; the most accurate one that fits the cost goal (at most {AFFORDABLE_UPDATES} updates of 25 images, about 500 "
             f"batch-1 `infer` calls) is **{cheap}** ({scores[cheap]:.1f} %). The rule ships the affordable one when it is "
             f"within {d['tolerance_pp']:g} pp of the most accurate: **{d['procedure']}** ships")
    return text + ("." if d["procedure"] == cheap else ", and the cost goal is missed.")
