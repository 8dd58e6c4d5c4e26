"""The class-incremental section of BENCHMARKS.md (``bench.continual_section``'s results; pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from bench.accuracy_report import mean_ci_text
from bench.continual_section import ARM_LABELS, ARMS, GOAL_PP, GOAL_REPLAY_BYTES, REFERENCE, STEPS
from bench.paired_accuracy import AVERAGE
from bench.table_output import markdown_table

__all__ = ["continual_report", "goal_sentences"]

KIB = 1024


def _step_name(step: str, old_ways: int, new_ways: int) -> str:
    return {"2": f"step 2: +{new_ways} new classes from step 1's checkpoint ({old_ways} classes)",
            "3": "step 3: more shots of every known class from step 2's checkpoint"}[step]


def step_table(arms: Mapping[str, Mapping]) -> list[str]:
    """The lines of one step's table: per arm (rows) the average accuracies, the old-class change, the paired
    deltas to (a) of all classes and of the old classes, the checkpoint and replay bytes, seconds and updates per
    run."""
    header = ("arm", "all classes", "old classes", "new classes", "old − step 1 (pp)", "all − (a) (pp)",
              "old − (a) (pp)", "checkpoint KiB", "replay KiB", "s / run", "updates / run")
    rows = []
    for arm in ARMS:
        row = arms[arm]
        deltas = ["-" if row[k] is None else mean_ci_text(row[k][AVERAGE], signed=True)
                  for k in ("delta_all", "delta_old")]
        rows.append([ARM_LABELS[arm], mean_ci_text(row["all"][AVERAGE]), mean_ci_text(row["old"][AVERAGE]),
                     mean_ci_text(row["new"][AVERAGE]), mean_ci_text(row["old_change"][AVERAGE], signed=True),
                     *deltas, f"{row['checkpoint_bytes'] / KIB:.0f}", f"{row['replay_bytes'] / KIB:.0f}",
                     f"{row['seconds']:.2f}", f"{row['updates']:.0f}"])
    return markdown_table(header, rows, "lrrrrrrrrrr")


def n_sentence(replay_arm: Mapping, tasks: Mapping[str, int], targets: list[str]) -> str:
    """What the run's N can show: the 95 % CIs of the replay arm's paired deltas to (a) (all, old, new
    classes), on average and per target, and the tasks per target a ±1 pp average CI would take (CI ~ 1/sqrt(N))."""
    deltas = [replay_arm[k] for k in ("delta_all", "delta_old", "delta_new") if replay_arm.get(k)]
    if not deltas:
        return ""
    average = [d[AVERAGE]["ci95"] for d in deltas]
    per_target = [d[t]["ci95"] for d in deltas for t in targets if t in d]
    n = min(tasks.values())
    needed = math.ceil(n * max(average) ** 2)
    return (f"What N = {n} tasks per target can show: the replay arm's paired deltas to (a) have 95 % CIs of "
            f"±{min(average):.1f}-{max(average):.1f} pp on average and ±{min(per_target):.1f}-{max(per_target):.1f} pp "
            "per target, so an average difference smaller than that (the goals' 2 pp among them) is not settled "
            f"here, and no single target's is; a ±1 pp average CI would take about {needed} tasks per target.")


def target_table(arms: Mapping[str, Mapping], targets: list[str]) -> list[str]:
    """All-class accuracy per target and arm (one step)."""
    rows = [[ARM_LABELS[arm], *(mean_ci_text(arms[arm]["all"][t]) for t in targets)] for arm in ARMS]
    return markdown_table(("arm", *targets), rows, "l" + "r" * len(targets))


def _established(goal: Mapping) -> str:
    """Whether the 95 % CI of an accuracy goal's measure lies on the side of its verdict."""
    low, high = goal["measured"] - goal["ci95"], goal["measured"] + goal["ci95"]
    if goal["met"] and low < goal["threshold"]:
        return "; the 95 % CI reaches below the threshold, so it is not established"
    if not goal["met"] and high >= goal["threshold"]:
        return "; the 95 % CI reaches above the threshold, so the miss is not established either"
    return ""


def goal_sentences(goals: list[Mapping], summary: Mapping, old_ways: int) -> list[str]:
    """Issue 42's goals in words, with their figures (``continual_goals``' verdicts)."""
    words = {True: "**met**", False: "**missed**"}
    by_goal = {g["goal"]: g for g in goals}
    a, o, c = by_goal["all_classes"], by_goal["old_classes"], by_goal["cost"]
    replay = summary["steps"]["2"]["with_replay"]
    old = replay["delta_old"][AVERAGE]
    return [
        f"- All-class accuracy after adding classes ≥ from scratch − {GOAL_PP:g} pp, with a replay memory of at most "
        f"{GOAL_REPLAY_BYTES / 2**20:g} MiB: {words[a['met']]}: the paired delta (--from with replay − (a)) is "
        f"{a['measured']:+.1f} ± {a['ci95']:.1f} pp, the largest memory {a['replay_bytes_max'] / KIB:.0f} KiB"
        + ("" if a["replay_bytes_max"] <= a["replay_limit"] else " (over the limit)")
        + ("" if a["replay_bytes_max"] > a["replay_limit"] else _established(a)) + ".",
        f"- Old-class accuracy drops by at most {GOAL_PP:g} pp from before the addition: {words[o['met']]}: "
        f"{o['measured']:+.1f} ± {o['ci95']:.1f} pp (old-class queries on the 5-way head against step 1's on its "
        f"{old_ways}-way head: part of any drop is the two more classes to confuse them with, which (a) suffers too: "
        f"{summary['steps']['2'][REFERENCE]['old_change'][AVERAGE]['mean']:+.1f} pp){_established(o)}. On the same 5-way "
        f"head, against (a)'s old-class accuracy (paired on the same tasks), the replay run's is {old['mean']:+.1f} ± "
        f"{old['ci95']:.1f} pp.",
        f"- The added run costs no more than from scratch on the new images alone plus the replayed ones: "
        f"{words[c['met']]}: {c['measured']:.2f} s per run against {c['threshold']:.2f} s, the bound priced at (a)'s "
        f"measured seconds per image of the same step times the {replay['rows']:.0f} images (new + replayed, the "
        "replayed ones read from their stored views) the replay run trains on; both take the same number of updates "
        "(the protocol's passes over those images), the replay run's from the memory's cut.",
    ]


def continual_report(section: Mapping, targets: list[str], lines: list[str]) -> None:
    """Appends the section: the design, one table per step, per-target all-class accuracy, the goals."""
    adapt = section["adapt"]
    lines += ["## Class-incremental adaptation (issue 42)", "",
              f"A device that learned {section['old_ways']} classes is given {section['new_ways']} more, then more "
              "images of the classes it knows (`bench/continual_section.py`). Per task (a fixed 5-way episode of the "
              "test pool), on the same images: step 1 adapts from the export to the "
              f"{section['old_ways']} old classes (checkpoint C1, replay budget "
              f"{section['replay_budget'] / 2**20:g} MiB); "
              "step 2 adds the new classes from C1; step 3 adds more shots of every class from step 2's checkpoint. "
              "Each arm continues its own lineage: **--from with replay** (the stored activations of earlier images "
              "are trained on beside the new images), **(a)** adapting from the export on every image seen so far "
              "(the upper bound), **(b)** the new images' prototypes added to the checkpoint's without an update, "
              "**(c)** `--from` with a replay budget of 0. "
              f"Adaptation: TinyTrain, {adapt['epochs']} passes, learning rate {adapt['learning_rate']}, the CLI's "
              "default budget per run (a run from a replay memory selects above its cut). Accuracy on the task's "
              "query images, mean over targets ± 95 % CI; deltas paired on the same tasks (as in section 1); "
              "checkpoint bytes as encoded, replay bytes of its memory, seconds of `adapt` + writing the "
              "checkpoint's state (one thread, evaluation excluded).", ""]
    for key, run in section["runs"].items():
        designs = ", ".join(f"{t} {d['shots']}+{d['more_shots']} shots, {d['queries']} queries"
                            for t, d in run["designs"].items())
        n = run["tasks"]
        lines += [f"### {run['label']} (`{run['model']}`)", "",
                  f"N = {', '.join(f'{t} {k}' for t, k in n.items())} tasks ({sum(n.values())} in all); images per "
                  f"class: {designs}. Step 1 ({section['old_ways']}-way): old-class accuracy "
                  f"**{mean_ci_text(run['step1_old'][AVERAGE])}**.", ""]
        for step in STEPS:
            lines += [f"**{_step_name(step, section['old_ways'], section['new_ways'])}**", "",
                      *step_table(run["steps"][step]), ""]
        lines += [n_sentence(run["steps"]["2"]["with_replay"], n, targets), ""]
        lines += ["All-class accuracy per target after step 2:", "", *target_table(run["steps"]["2"], targets), ""]
        lines += ["Goals of issue 42 (step 2, --from with replay; averages over targets):", "",
                  *goal_sentences(run["goals"], run, section["old_ways"]), ""]
