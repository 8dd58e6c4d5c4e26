"""Section 1 of ``BENCHMARKS.md``: the paired accuracy tables, the tuning that chose each policy's
settings, the weights decision and the presets' cost estimates (pure functions of ``results.json``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bench.config import LITE0, BenchConfig, preset_config, quick_config
from bench.learning_rates import setting_key
from bench.methods import NO_META
from bench.run_cost import estimate_seconds
from bench.successive_halving import NO_OP_SHARE
from bench.table_output import markdown_table
from tflite_train import contract as C
from tflite_train.default_weights import default_lite0_meta_trained
from tflite_train.sparse.policies import policy_spec

__all__ = ["accuracy_section", "mean_ci_text"]

MIB = 2**20


def mean_ci_text(entry: Mapping | None, signed: bool = False) -> str:
    """``"71.8 ± 1.7"`` (``"+0.3 ± 1.1"`` when ``signed``) of a MeanCI dict; ``"-"`` for None."""
    if entry is None:
        return "-"
    sign = "+" if signed else ""
    return f"{entry['mean']:{sign}.1f} ± {entry['ci95']:.1f}"


def _halving_words(config: BenchConfig) -> str:
    """The tuning protocol in words."""
    grid = len(config.tuning_grid)
    rates = ", ".join(f"{lr:g}" for lr in config.learning_rates)
    passes = ", ".join(str(e) for e in config.epochs_grid)
    if grid == 1:
        return f"Every policy trains at learning rate {rates} for {passes} passes (a one-setting grid: no tuning)."
    rounds = config.tuning_schedule
    if len(rounds) == 1:
        search = f"every setting on {rounds[0]} validation-pool tasks per target; the best is used"
    else:
        steps = [f"every setting on the first {rounds[0]} validation-pool tasks per target"]
        steps += [f"the best 1/{config.halving_eta} (rounded up) of the previous round on the first {n}"
                  for n in rounds[1:]]
        search = ("successive halving (`bench/successive_halving.py`): " + "; then ".join(steps)
                  + "; the best of the last round is used (a later round's tasks begin with the earlier ones, "
                  "whose results are reused)")
    return (f"Each training policy's learning rate ({rates}) and passes over the support set ({passes}) are chosen "
            f"per backbone from the {grid} settings on validation tasks only: {search}. Score = the mean over targets "
            "of the per-target mean validation accuracy; a setting that left the untrained row's query predictions "
            f"unchanged on more than {NO_OP_SHARE:.0%} of the round's validation tasks (equal accuracy, for tasks "
            "stored without predictions) ranks below every setting that trains; ties go to fewer passes, then the "
            "smaller rate.")


SETTLED_N = 60
"""Paired tasks per target at which the average's paired CI is about ±1 pp (issue 28)."""


def _power_words(run: Mapping, deltas: Mapping, targets: list[str]) -> str:
    """What this run's N can and cannot show, from the widths of its own paired intervals."""
    n = min(run.get("paired_tasks", {}).get(t, 0) for t in targets) if targets else 0
    average = [d["average"]["ci95"] for d in deltas.values() if d.get("average")]
    single = [d[t]["ci95"] for d in deltas.values() for t in targets if d.get(t)]
    if not average or not single:
        return f"What N = {n} paired tasks per target can show: nothing yet (no paired interval)."
    words = (f"What N = {n} paired tasks per target can show: the average deltas' 95 % CIs are "
             f"±{min(average):.1f}-{max(average):.1f} pp, so an average difference beyond about {max(average):.1f} pp "
             "is settled and a smaller one (a CI that contains 0) is not; one target alone (±"
             f"{min(single):.1f}-{max(single):.1f} pp) settles only larger differences.")
    if n < SETTLED_N:
        words += f" Below N = {SETTLED_N} per target no comparison of about 1 pp is settled."
    return words


def accuracy_section(config: BenchConfig, results: Mapping, lines: list[str]) -> dict:
    """Section 1: the paired tables, one per backbone run; returns key -> finished run (for the targets)."""
    section = results["sections"]["accuracy"]
    targets = results["targets"]
    pools = "; ".join(f"{t}: by {p['by']}, validation {p['validation']['images']} images / "
                      f"{p['validation']['classes']} classes, test {p['test']['images']} / {p['test']['classes']}"
                      for t, p in section["pools"].items())
    batches = ("Adam, every policy at batch 1 (FullTrain too: as many optimizer steps per pass as the others)"
               if config.full_train_batch == 1 else
               f"Adam; FullTrain at batch {config.full_train_batch}, the others at batch 1")
    lines += ["## 1. Paired accuracy (Table 1 shape)", ""]
    if results.get("partial"):
        lines += ["Unfinished: the tables use the tasks every policy of a target has done so far, and *tasks done* "
                  "gives N per cell.", ""]
    lines += [f"N = {config.tasks} tasks per target (various-way various-shot: {config.min_ways}-{config.max_ways} ways, "
              f"<= {config.max_support_per_class} shots/class, <= {config.max_support_total} support, <= "
              f"{config.max_query} queries/class), **the same seeded tasks for every policy and both weight "
              "variants of a backbone**; each backbone reads its images from the data cache at its own input size "
              "(never upscaled; every cache is prepared by the device's own preprocessing, centre crop + bilinear, "
              f"`tflite_train.runtime.to_model_input`; the cache per run is named below its table). {batches}; each policy trains for its chosen number of "
              "passes (epochs) over the support set at its chosen learning rate, through the TFLite runtime "
              "(`TrainableModel` + `adapt` + `evaluate`; the sparse policies and LastLayer train from the "
              "cached cut where the export has one). Every adaptation is stored as it finishes "
              "(`tasks/`, `bench/task_store.py`, keyed by the model's id, the adapt config, target, pool and "
              "task), so an interrupted run resumes where it stopped.", "",
              f"**Validation split** (`bench/validation_split.py`): each target is cut by a seeded hash (sha256 of "
              f"seed/target/key) into a validation pool and a test pool: by class when it has >= "
              f"{config.class_split_min_classes} classes, else by image within each class "
              f"({config.validation_fraction:.0%} for validation). {pools}. " + _halving_words(config)
              + " The reported tasks come from the test pool only.", "",
              "**Statistics** (`bench/confidence.py`): a policy's cell is mean ± the 95 % Student-t half-width over "
              "its N tasks; a delta A − B is the mean of the per-task differences on the same tasks ± the paired "
              "95 % t half-width. *average* = the mean over targets of the per-target means (each target weighs "
              "the same); its CI combines the per-target standard errors, SE² = Σ_t s_t² / n_t / T², with "
              "Welch–Satterthwaite degrees of freedom.", ""]
    finished = {}
    for key, run in section["runs"].items():
        if _run_table(config, targets, run, lines, section.get("figures", {}).get(key)):
            finished[key] = run
    lines += [f"- {results['tinytl_note']}"]
    lines += [_estimates(config, results, section), ""]
    return finished


def _estimates(config: BenchConfig, results: Mapping, section: Mapping) -> str:
    """The presets' estimated wall times from this run's per-task costs (``bench.run_cost``)."""
    targets = results["targets"]
    presets = (("the defaults (`make bench`)", BenchConfig(workers=2)), ("`--quick`", quick_config(workers=2)),
               ("`--preset powered`", preset_config("powered", workers=2)))
    estimates = []
    for name, preset in presets:
        est = estimate_seconds(preset, section["runs"], len(targets))
        if not est:
            estimates.append(f"{name}: not estimated (this run measured none of its backbones)")
            continue
        parts = ", ".join(f"{section['runs'][k]['label']} {v['total'] / 3600:.1f} h (tuning {v['tuning'] / 3600:.1f} h)"
                          for k, v in est.items())
        estimates.append(f"{name} (N = {preset.tasks}, {len(preset.tuning_grid)} settings, validation rounds of "
                         f"{list(preset.tuning_schedule)} tasks per target, "
                         f"FullTrain batch {preset.full_train_batch}): "
                         f"{sum(v['total'] for v in est.values()) / 3600:.1f} h ({parts})")
    return ("- Cost: the *s / task* column is the measured wall time of one adaptation (one interpreter thread, at the "
            "chosen passes) on this machine in this run, with the tasks whose steps ran from the cached "
            "cut. Wall time of the paired section on 2 workers and the "
            f"{len(targets)} targets of this cache, estimated from those per-task costs (`bench/run_cost.py`: "
            "seconds per task and pass x the successive-halving rounds, the longest passes for every reported "
            "run; adaptation only, so a lower bound up to the long-side rounding: evaluation, task preparation, "
            "exports, SparseUpdate's source Fisher and the load at the time come on top; FullTrain's cost is per "
            f"pass at this run's batch {config.full_train_batch}; e.g. this run's paired section took "
            f"{results['section_seconds'].get('accuracy', 0) / 60:.0f} min on {config.workers} worker(s) in its "
            "last invocation): " + "; ".join(estimates) + "." + _stored_words(config, section))


def _stored_words(config: BenchConfig, section: Mapping) -> str:
    """The measured adaptation time of each finished backbone run over all the sessions it took."""
    parts = []
    for run in section["runs"].values():
        stored = run.get("stored_seconds")
        if stored:
            hours = sum(stored.values()) / 3600
            parts.append(f"{run['label']}: {hours:.1f} h of one-thread adaptation time (tuning "
                         f"{stored['tuning'] / 3600:.1f} h, reported tasks {stored['tests'] / 3600:.1f} h), i.e. "
                         f"about {hours / config.workers:.1f} h of wall time on {config.workers} worker(s)")
    if not parts:
        return ""
    return (" Measured over every session of this run (the sum of the `seconds` of every stored adaptation, "
            "`bench.paired_section.stored_seconds`; adaptation only): " + "; ".join(parts) + ". A run split "
            "across sessions resumes when its command is rerun: the stored tasks are read back, not rerun.")


def _sparse_update_criterion(run: Mapping) -> str:
    """How the run's SparseUpdate ranked its layers, in words (its saved ``adapt.criterion``)."""
    criterion = next((m["adapt"].get("criterion", "tinytrain") for m in run["methods"].values()
                      if policy_spec(m["adapt"]["policy"]).static_ranking), "tinytrain")
    if criterion == "fisher":
        return ("the mean Fisher potential alone (the layers' contribution, as MIT's search maximises it; "
                "`tflite_train.sparse.SPARSE_UPDATE_CRITERION`)")
    return f"the `{criterion}` criterion" + (" (TinyTrain's Eq. 3)" if criterion == "tinytrain" else "")


def _tasks_done(targets: list[str], run: Mapping, expected: int, lines: list[str]) -> None:
    done = ([label, *(str(run["per_target"][t][label]["tasks"]) for t in targets)] for label in run["methods"])
    lines += ["Tasks done per cell (of N = %d):" % expected, "", *markdown_table(("policy", *targets), done), ""]


def _cost_cell(method: Mapping, cost: Mapping) -> str:
    value = cost.get("seconds_per_task")
    seconds = "-" if value is None else f"{value:.1f}" if value >= 1 else f"{value:.2f}"
    if not policy_spec(method["adapt"]["policy"]).trains or "cache_used" not in cost:
        return seconds
    return f"{seconds} (cache {cost['cache_used']}/{cost['tasks']})"


def _run_table(config: BenchConfig, targets: list[str], run: Mapping, lines: list[str], figure: str | None) -> bool:
    """One backbone run's tables; returns whether it has a summary (finished or partial)."""
    if run["meta_trained"]:
        weights = (f"meta-trained weights `{run['weights']}`; without meta-training: `{run['baseline_weights']}`")
        if run["backbone"] == LITE0:
            weights += (" (the rows *... without meta-training* are the default export's: `tflite_train.default_weights`)"
                        if not default_lite0_meta_trained() else " (the default export's weights)")
        if "meta_ablation" in str(run["baseline_weights"]) and "meta_ablation" not in str(run["weights"]):
            weights += (" (the pre-training stage of a separate `train-weights` run, `weights/meta_ablation/`; the "
                        "shipped weights' own pre-training stage is not kept, so this delta also holds run-to-run "
                        "variation)")
    else:
        weights = (f"**no meta-trained weights given**: every row runs on `{run['baseline_weights']}` (not "
                   "meta-trained), and the meta-training delta is not measured")
    lines += [f"### {run['label']} px", ""]
    stage = run.get("stage", "done")
    if stage == "tuning":
        progress = run.get("tuning_progress")
        done = "" if not progress or "done" not in progress else (
            f": the current round has {progress['done']} of {progress['tasks'] * len(progress['cells'])} "
            "validation adaptations stored")
        lines += [f"**Unfinished**: still choosing the settings on validation tasks{done}; no test task yet.", ""]
        return False
    if run.get("cache"):
        weights += f"; images from the data cache `{run['cache']}`"
    lines += [f"{weights}. Model file {run['model_bytes'] / 1e6:.1f} MB; candidates: the last "
              f"{len(run[C.F_CANDIDATES])} layers ({run[C.F_CANDIDATES][0]} ... {run[C.F_CANDIDATES][-1]}). "
              f"B_mem = {run['memory_budget_bytes'] / MIB:.3f} MiB of backward-pass peak memory (the paper's "
              f"{config.memory_budget_mib:g} MiB for MCUNet at 128 px, scaled by this model's LastLayer backward memory "
              "against MCUNet@128's: `tflite_train.sparse.scaled_memory_budget`, the library's default B_mem, as in "
              "`adapt` and the demo), "
              f"B_compute = {config.compute_fraction:.0%} of the model's full backward pass "
              "(`AdaptConfig.compute_fraction`, the library's definition); TinyTrain and "
              "TinyTrain without meta-training are held to both. LastLayer and FullTrain have no budget"
              + (", nor has MIT's SparseUpdate list (the paper's row)." if any(
                  (m["adapt"]["sparse_update_layers"] for m in run["methods"].values()
                   if policy_spec(m["adapt"]["policy"]).static_ranking))
                 else "; SparseUpdate (no published list for this backbone) is the static ranking of source "
                      "meta-training tasks under TinyTrain's budgets, by "
                      + _sparse_update_criterion(run) + "."), ""]
    if stage != "done":
        _tasks_done(targets, run, config.tasks, lines)
    summary = run.get("summary")
    if not summary:
        lines += ["No target has two tasks done by every policy yet: no means.", ""]
        return False
    shown = run.get("summary_targets", targets)
    means, deltas = summary["means"], summary["deltas"]
    average = "**average**" if len(shown) == len(targets) else f"**average of {len(shown)}**"
    table = []
    for label, method in run["methods"].items():
        tuned = run["tuning"].get(label)
        lr = "-" if tuned is None else f"{tuned['learning_rate']:g}"
        ep = "-" if tuned is None else str(tuned["epochs"])
        c = run["cost"][label]
        table.append([label, *(mean_ci_text(means[label].get(t)) for t in targets),
                      f"**{mean_ci_text(means[label]['average'])}**", lr, ep, f"{c['memory_bytes'] / MIB:.2f}",
                      f"{c['backward_macs'] / 1e6:.2f}", _cost_cell(method, c)])
    lines += markdown_table(("policy", *targets, average, "lr", "passes", "backward memory (MiB)", "backward MACs (M)",
                             "s / task"), table)
    lines += ["", "Paired deltas (pp; A − B on the same tasks, mean ± paired 95 % CI):", "",
              *markdown_table(("delta", *targets, average),
                              ([name, *(mean_ci_text(d.get(t), signed=True) for t in targets),
                                f"**{mean_ci_text(d['average'], signed=True)}**"] for name, d in deltas.items()))]
    lines += ["", _power_words(run, deltas, targets), ""]
    lines += noop_table(run, targets)
    for n in run.get("noop", []):
        lines.append(f"- **No-op warning**: {n['label']} on {n['target']} left {n['reference']}'s query outcome "
                     f"unchanged on {n['equal']} of {n['tasks']} tasks (more than {NO_OP_SHARE:.0%}).")
    if run.get("noop"):
        lines.append("")
    if figure:
        lines += [f"Accuracy (mean, 95 % CI) against the cost of one adaptation, per target and on average: seconds "
                  "(left) and backward MACs per optimizer step (right):", "", f"![accuracy vs cost]({figure})", ""]
    _tuning_table(run, lines)
    lines += weights_decision(run)
    return True


def noop_table(run: Mapping, targets: Sequence[str]) -> list[str]:
    """The no-op check per training policy and target: the tasks on which the adaptation left the untrained
    row's query predictions exactly as they were (``TaskRecord.unchanged_from``), beside the tasks of merely
    equal accuracy, which small query sets make common without any no-op. Empty for runs stored without
    the counts."""
    cells = {label: [run["per_target"][t][label] for t in targets] for label, method in run["methods"].items()
             if policy_spec(method["adapt"]["policy"]).trains}
    if not cells or any("unchanged_from_none" not in c for row in cells.values() for c in row):
        return []
    queries = run.get("queries_per_task", {})

    def text(c: Mapping) -> str:
        basis = "" if c["predictions_compared"] == c["compared_to_none"] else " ‡"
        return f"{c['unchanged_from_none']} ({c['equal_to_none']}) / {c['compared_to_none']}{basis}"

    lines = [f"No-op check: tasks whose query predictions the policy left exactly as its untrained row's (in "
             f"brackets: tasks of equal accuracy) / tasks compared; a policy is a no-op on a target when more than "
             f"{NO_OP_SHARE:.0%} of its tasks are unchanged. ‡ = some tasks were stored without predictions and "
             "are compared by accuracy. Equal accuracy does not mean unchanged predictions on small query sets "
             + ("(mean queries per task: " + ", ".join(f"{t} {queries[t]:.1f}" for t in targets if t in queries)
                + ")" if queries else "") + ":", "",
             *markdown_table(("policy", *targets), ([label, *map(text, row)] for label, row in cells.items()))]
    return lines + [""]


def _tuning_table(run: Mapping, lines: list[str]) -> None:
    """Every validation score the tuning saw, per policy and round; the chosen setting in bold."""
    tuning = {label: t for label, t in run["tuning"].items() if t["scores"]}
    if not tuning:
        return
    keys = list(dict.fromkeys(k for t in tuning.values()
                              for r in (t.get("rounds") or [{"scores": t["scores"]}]) for k in r["scores"]))
    lines += ["Validation accuracy (%, mean over targets of the validation-pool task means) per learning rate / "
              "passes and round (tasks per target); bold = chosen, - = not run (dropped in an earlier round), "
              f"† = no-op (the untrained row's outcome unchanged on more than {NO_OP_SHARE:.0%} of the tasks: "
              "equal predictions, or equal accuracy for tasks stored without predictions):", ""]
    table = []
    for label, t in tuning.items():
        best = f"{t['learning_rate']:g}/{t['epochs']}"
        rounds = t.get("rounds") or [{"tasks": None, "scores": t["scores"]}]
        for k, r in enumerate(rounds):
            last = k == len(rounds) - 1
            noop = {key for key, share in r.get("unchanged", {}).items() if share > NO_OP_SHARE}
            cells = ["-" if key not in r["scores"] else
                     (f"**{r['scores'][key]:.1f}**" if last and key == best else f"{r['scores'][key]:.1f}")
                     + ("†" if key in noop else "") for key in keys]
            table.append([label if k == 0 else "", f"{k + 1} ({r['tasks'] or '?'})", *cells])
    lines += [*markdown_table(("policy", "round", *keys), table), ""]


def weights_decision(run: Mapping) -> list[str]:
    """Which weights to ship, decided on the validation tasks before any reported task: the best validation
    score of TinyTrain on the meta-trained weights against TinyTrain on the weights without meta-training
    (issue 28: meta-training ships only if it wins on targets held out from it). [] without both rows."""
    tuning = run.get("tuning", {})
    meta, base = tuning.get("TinyTrain"), tuning.get(NO_META)
    if not run.get("meta_trained") or not meta or not base or not meta["scores"] or not base["scores"]:
        return []

    def best(entry: Mapping) -> float:
        return float(entry["scores"][setting_key((entry["learning_rate"], entry["epochs"]))])

    a, b = best(meta), best(base)
    winner = f"the meta-trained weights (`{run['weights']}`)" if a > b else \
        f"the weights without meta-training (`{run['baseline_weights']}`)"
    shipped = f"the meta-trained weights (`{run['weights']}`)" if default_lite0_meta_trained() else \
        f"the weights without meta-training (`{run['baseline_weights']}`)"
    return [f"**Weights decision** (validation tasks only, before the reported tasks): TinyTrain at its chosen "
            f"setting scored {a:.1f} % on the meta-trained weights and {b:.1f} % without meta-training (mean over "
            f"targets of the validation-task means; a tie goes to the weights without meta-training), which favours "
            f"{winner} on these {(meta.get('rounds') or [{}])[-1].get('tasks', '?')} tasks per target. Too few tasks to decide (issue 39): the decision that counts is the procedure section's on "
            f"20 validation tasks per target (above), and the default export ships {shipped} "
            "(`tflite_train.default_weights`, which states why).", ""]

