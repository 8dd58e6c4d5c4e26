"""Renders a benchmark run's ``results.json`` content as ``BENCHMARKS.md`` (pure function of its inputs)."""

from __future__ import annotations

from collections.abc import Mapping

from bench.config import LITE0, BenchConfig, preset_config, quick_config
from bench.methods import FORWARD_BUDGET_LABEL, NO_META, PROTOCOL_SUFFIX
from bench.paired_accuracy import verdict_sentence
from bench.run_cost import estimate_seconds
from tflite_train import contract as C

MIB = 2**20
STEP_TARGET_FULL = 7.0
STEP_TARGET_PEER = 5.0
SELECTION_TARGET = 0.04
PAPER_TABLE8_NOTE = (
    "Paper (appendix table `tab:latency_pizero2`, Pi Zero 2, MCUNet, 25 samples, 40 iterations): SparseUpdate "
    "0 + 607 s = 607 s, TinyTrain 18.7 s Fisher + 526 s run = 544 s (selection 3.4 %); FullTrain about two hours "
    "(text). Absolute times are not comparable (different device and resolution); the shares and ratios are.")


def _fmt_mib(value: float | None) -> str:
    return "-" if value is None else f"{value / MIB:.2f}"


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def _protocol(config: BenchConfig) -> str:
    """How long each method trains, in words."""
    if config.epochs is None:
        return f"{config.iterations} Adam steps per task (every method)"
    full = ("every method at batch 1" if config.full_train_batch == 1 else
            f"FullTrain {config.epochs} x ceil(N / {config.full_train_batch}) steps at batch {config.full_train_batch}")
    return (f"Adam, {config.epochs} passes over each task's support set of N images (the paper's protocol: "
            f"{config.epochs} x N steps at batch 1; {full})")


def _pm(entry: Mapping | None, signed: bool = False) -> str:
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
            "of the per-target mean validation accuracy; ties go to fewer passes, then the smaller rate.")


def _accuracy_section(config: BenchConfig, results: Mapping, lines: list[str]) -> dict:
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
              "variants of a backbone, and the same images for every backbone** (each model resizes them to its "
              f"input: 64 px cache images, bilinear). {batches}; each policy trains for its chosen number of "
              "passes (epochs) over the support set at its chosen learning rate, through the TFLite runtime "
              "(`TrainableModel` + `adapt` + `evaluate`; the sparse policies and LastLayer train from the "
              "frozen-prefix cache where the export has one). Every adaptation is stored as it finishes "
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
            "chosen passes) on this machine in this run, with the tasks whose steps ran from the frozen-prefix "
            "cache. Wall time of the paired section on 2 workers and the "
            f"{len(targets)} targets of this cache, estimated from those per-task costs (`bench/run_cost.py`: "
            "seconds per task and pass x the successive-halving rounds, the longest passes for every reported "
            "run; adaptation only, so a lower bound up to the long-side rounding: evaluation, task preparation, "
            "exports, SparseUpdate's source Fisher and the load at the time come on top; FullTrain's cost is per "
            f"pass at this run's batch {config.full_train_batch}; e.g. this run's paired section took "
            f"{results['section_seconds'].get('accuracy', 0) / 60:.0f} min on {config.workers} worker(s)): "
            + "; ".join(estimates) + ".")


def _tasks_done(targets: list[str], run: Mapping, expected: int, lines: list[str]) -> None:
    lines += ["Tasks done per cell (of N = %d):" % expected, "",
              "| policy | " + " | ".join(targets) + " |", "|---" * (len(targets) + 1) + "|"]
    for label in run["methods"]:
        lines.append(f"| {label} | " + " | ".join(str(run["per_target"][t][label]["tasks"]) for t in targets) + " |")
    lines.append("")


def _cost_cell(method: Mapping, cost: Mapping) -> str:
    value = cost.get("seconds_per_task")
    seconds = "-" if value is None else f"{value:.1f}" if value >= 1 else f"{value:.2f}"
    if method["adapt"]["policy"] == "none" or "cache_used" not in cost:
        return seconds
    return f"{seconds} (cache {cost['cache_used']}/{cost['tasks']})"


def _run_table(config: BenchConfig, targets: list[str], run: Mapping, lines: list[str], figure: str | None) -> bool:
    """One backbone run's tables; returns whether it has a summary (finished or partial)."""
    if run["meta_trained"]:
        weights = (f"meta-trained weights `{run['weights']}`; without meta-training: `{run['baseline_weights']}`")
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
                  (m["adapt"]["sparse_update_layers"] for m in run["methods"].values() if m["adapt"]["policy"] == "sparse_update"))
                 else "; SparseUpdate (no published list for this backbone) is the static Fisher ranking of source "
                      "meta-training tasks under TinyTrain's budgets."), ""]
    if stage != "done":
        _tasks_done(targets, run, config.tasks, lines)
    summary = run.get("summary")
    if not summary:
        lines += ["No target has two tasks done by every policy yet: no means.", ""]
        return False
    shown = run.get("summary_targets", targets)
    means, deltas = summary["means"], summary["deltas"]
    average = "**average**" if len(shown) == len(targets) else f"**average of {len(shown)}**"
    lines += ["| policy | " + " | ".join(targets) + f" | {average} | lr | passes | backward memory (MiB) | "
              "backward MACs (M) | s / task |",
              "|---" * (len(targets) + 7) + "|"]
    for label, method in run["methods"].items():
        tuned = run["tuning"].get(label)
        lr = "-" if tuned is None else f"{tuned['learning_rate']:g}"
        ep = "-" if tuned is None else str(tuned["epochs"])
        c = run["cost"][label]
        lines.append(f"| {label} | " + " | ".join(_pm(means[label].get(t)) for t in targets)
                     + f" | **{_pm(means[label]['average'])}** | {lr} | {ep} | {c['memory_bytes'] / MIB:.2f} | "
                     f"{c['backward_macs'] / 1e6:.2f} | {_cost_cell(method, c)} |")
    lines += ["", "Paired deltas (pp; A − B on the same tasks, mean ± paired 95 % CI):", "",
              "| delta | " + " | ".join(targets) + f" | {average} |", "|---" * (len(targets) + 2) + "|"]
    for name, d in deltas.items():
        lines.append(f"| {name} | " + " | ".join(_pm(d.get(t), signed=True) for t in targets)
                     + f" | **{_pm(d['average'], signed=True)}** |")
    lines.append("")
    for n in run.get("noop", []):
        lines.append(f"- **No-op warning**: {n['label']} on {n['target']} scored exactly {n['reference']}'s "
                     f"accuracy on {n['equal']} of {n['tasks']} tasks (training changed no query prediction on "
                     "most tasks).")
    if run.get("noop"):
        lines.append("")
    if figure:
        lines += [f"Accuracy (mean, 95 % CI) against the cost of one adaptation, per target and on average: seconds "
                  "(left) and backward MACs per optimizer step (right):", "", f"![accuracy vs cost]({figure})", ""]
    _tuning_table(run, lines)
    return True


def _tuning_table(run: Mapping, lines: list[str]) -> None:
    """Every validation score the tuning saw, per policy and round; the chosen setting in bold."""
    tuning = {label: t for label, t in run["tuning"].items() if t["scores"]}
    if not tuning:
        return
    keys = list(dict.fromkeys(k for t in tuning.values()
                              for r in (t.get("rounds") or [{"scores": t["scores"]}]) for k in r["scores"]))
    lines += ["Validation accuracy (%, mean over targets of the validation-pool task means) per learning rate / "
              "passes and round (tasks per target); bold = chosen, - = not run (dropped in an earlier round):", "",
              "| policy | round | " + " | ".join(keys) + " |", "|---" * (len(keys) + 2) + "|"]
    for label, t in tuning.items():
        best = f"{t['learning_rate']:g}/{t['epochs']}"
        rounds = t.get("rounds") or [{"tasks": None, "scores": t["scores"]}]
        for k, r in enumerate(rounds):
            last = k == len(rounds) - 1
            cells = ["-" if key not in r["scores"] else
                     f"**{r['scores'][key]:.1f}**" if last and key == best else f"{r['scores'][key]:.1f}"
                     for key in keys]
            name = label if k == 0 else ""
            lines.append(f"| {name} | {k + 1} ({r['tasks'] or '?'}) | " + " | ".join(cells) + " |")
    lines.append("")


def _cost_section(config: BenchConfig, results: Mapping, lines: list[str]) -> None:
    section = results["sections"]["backward_cost"]
    lines += ["## 2. Backward-pass memory and compute (Tables 2 and 6)", "",
              f"Cost model at {config.cost_input_size}x{config.cost_input_size}, B_mem = {config.memory_budget_mib:g} MiB "
              "for every backbone, as the paper's tables (an explicit budget, not the scaled default), "
              f"B_compute = {config.compute_fraction:.0%} of FullTrain's backward MACs; ours / paper (MiB = the paper's MB; MACs per sample, "
              f"FullTrain's activation memory at batch {config.cost_full_train_batch}, the paper's). "
              "TinyTrain is the real selection (`tinytrain_policy`) on the Fisher measured on one task of the demo "
              "model (MCUNet; channel counts do not depend on the resolution) or on seeded synthetic Fisher "
              "(mbv2, proxyless: no trained weights). SparseUpdate is MIT's static list for MCUNet, the static "
              "policy on synthetic meta-training Fisher otherwise. TinyTL is not built.", ""]
    for key, rows in section.items():
        if key.endswith("unfused_full_train_bytes"):
            continue
        backbone, optimizer = key.split("/")
        lines += [f"**{backbone}, {optimizer}**", "",
                  "| method | batch | weights | optimizer | activations | total (ours / paper) | MACs M (ours / paper) | selection |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            p = r["paper"] or {}
            pm = lambda k: "-" if p.get(k) is None else f"{p[k]:.2f}"  # noqa: E731
            paper_macs = "-" if p.get("macs") is None else f"{p['macs'] / 1e6:.2f}"
            lines.append(
                f"| {r['method']} | {r['batch_size']} | {_fmt_mib(r['weights_bytes'])} / {pm('weights_mib')} | "
                f"{_fmt_mib(r['optimizer_bytes'])} / {pm('optimizer_mib')} | {_fmt_mib(r['activation_bytes'])} / "
                f"{pm('activation_mib')} | {_fmt_mib(r['total_bytes'])} / {pm('total_mib')} | "
                f"{r['backward_macs'] / 1e6:.2f} / {paper_macs} | "
                f"{r['description']} |")
        lines.append("")
    for backbone in ("mcunet", "mbv2", "proxyless"):
        value = section.get(f"{backbone}/unfused_full_train_bytes")
        if value is not None:
            lines.append(f"- {backbone} FullTrain with unfused-graph activation accounting (conv/BN inputs and ReLU6 "
                         f"outputs as floats): {value / MIB:.0f} MiB.")
    lines += ["- Disagreements: our FullTrain memory is below the paper's (906/1049/857 MB) with the fused accounting; "
              "the unfused accounting above is the closer reading of the paper's figure. Where TinyTrain or "
              "SparseUpdate rows differ from the paper, the selection differs (different Fisher, synthetic for "
              "mbv2/proxyless), not the per-layer cost model, which matches the paper's LastLayer rows.", ""]


def _timing_section(config: BenchConfig, results: Mapping, lines: list[str]) -> dict:
    section = results["sections"]["timing"]
    task = section["task"]
    lines += ["## 3. End-to-end adaptation time (Table 8 shape)", "",
              f"Interpreter `{results['environment']['interpreter_module']}` "
              f"{results['environment']['interpreter_version']}, {config.threads} thread(s), one {task['ways']}-way "
              f"task of {task['target']} with {task['support']} support images, {_protocol(config)}; "
              f"median of {config.timing_runs} runs (fresh load each). Seconds.", "",
              "| method | batch | steps | load | head | Fisher + selection | prefix cache | training | step | end-to-end | "
              "selection share |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = {r["label"]: r for r in section["rows"]}
    for r in section["rows"]:
        s = r["seconds"]
        lines.append(f"| {r['label']} | {r['batch_size']} | {r['steps']} | {s['load']:.3f} | {s['head']:.3f} | "
                     f"{s['fisher_selection']:.3f} | {s.get('cache', 0.0):.3f} | {s['training']:.3f} | "
                     f"{r['step'] * 1e3:.1f} ms | {r['end_to_end']:.3f} | {r['selection_share']:.1%} |")
    peer = section.get("tf_recipe")
    full_1 = rows.get("FullTrain (batch 1)")
    if peer:
        steps = full_1["steps"] if full_1 else peer["steps"]
        lines.append(f"| TF recipe (full gradient, GradientTape, Flex-converted) | {peer['batch_size']} | {steps} | "
                     f"{peer['load']:.3f} | - | - | - | {peer['step_median'] * steps:.3f} (est.) | "
                     f"{peer['step_median'] * 1e3:.1f} ms | - | - |")
    notes = []
    if any(label.endswith(PROTOCOL_SUFFIX) for label in rows):
        notes.append(f"Rows marked \"Table 8 protocol\" run 40 passes over the {task['support']} support images "
                     f"({40 * task['support']} steps of batch 1; the paper's \"training using all the samples (e.g. 25) "
                     "for 40 iterations\"); the others run as in the accuracy section.")
    if peer:
        notes.append(f"The peer's training time is its median step ({peer['steps']} timed) times FullTrain (batch 1)'s "
                     "step count.")
    if section.get("infer_seconds_batch1") is not None:
        notes.append(f"Forward pass alone (`infer`, batch 1): {section['infer_seconds_batch1'] * 1e3:.1f} ms - the floor "
                     "of any train step, since every step runs the whole forward pass.")
    lines += ["", " ".join(notes), "", PAPER_TABLE8_NOTE]
    if peer:
        lines += ["", f"- TF-recipe peer: `bench/tf_recipe.py`, converted with SELECT_TF_OPS to a "
                  f"{peer['flex_model_bytes'] / 1e6:.1f} MB Flex model in {peer['convert_seconds']:.0f} s; ran on "
                  f"**{peer['runner']}**; loss {peer['loss_first']:.3f} -> {peer['loss_last']:.3f} over "
                  f"{peer['steps'] + 1} steps."]
        if peer.get("interpreter_error"):
            lines.append(f"- `tf.lite.Interpreter` refused the Flex model: \"{peer['interpreter_error'][:160]}...\" "
                         "(the TF 2.21 wheel does not link the Flex delegate), so the same train graph was timed as a "
                         "`tf.function` in TensorFlow - the kernels Flex would run, minus the delegate's copies, so "
                         "the peer is if anything flattered.")
    lines.append("")
    return {"rows": rows, "peer": peer, "infer": section.get("infer_seconds_batch1")}


def _ablation_section(config: BenchConfig, results: Mapping, lines: list[str]) -> None:
    section = results["sections"]["ablations"]
    lines += ["## 4. Ablations (Table 3, Figure 5)", "",
              f"Target {section['target']}, N = {section['tasks']} tasks (a prefix of the accuracy section's tasks), "
              "TinyTrain policy unless named; mean ± 95 % CI (%).", ""]
    titles = {"criteria": "Layer criterion (Table 3; `l2` = L2-norm layer selection)",
              "channels": "Channel selection at 1/2, 1/4, 1/8 of the channels (Figure 5)",
              "compute_budget": "Compute budget: 15 % of FullTrain's backward MACs (default) or of the forward MACs"}
    for name, rows in section["groups"].items():
        lines += [f"**{titles.get(name, name)}**", "", "| variant | accuracy | memory (MiB) | MACs (M) | first task's layers |",
                  "|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['label']} | {r['summary']['mean']:.1f} ± {r['summary']['ci95']:.1f} | "
                         f"{r['memory_bytes'] / MIB:.2f} | {r['backward_macs'] / 1e6:.2f} | {', '.join(r['layers']) or '-'} |")
        lines.append("")


def _step_ratio(label: str, row: Mapping, reference_step: float, target: float, reference: str, note: str = "") -> str:
    """"- <label> step >= <target>x faster than <reference>: verdict (ratio: ms vs ms<note>)"."""
    ratio = reference_step / row["step"]
    return (f"- {label} step ≥ {target:g}x faster than {reference}: {_verdict(ratio >= target)} ({ratio:.1f}x: "
            f"{row['step'] * 1e3:.1f} vs {reference_step * 1e3:.1f} ms{note}).")


def _timing_targets(config: BenchConfig, timing: Mapping, lines: list[str]) -> None:
    rows, peer = timing["rows"], timing["peer"]
    tiny = rows.get("TinyTrain")
    full_1 = rows.get("FullTrain (batch 1)")
    full_b = rows.get(f"FullTrain (batch {config.full_train_batch})")
    for variant in ("TinyTrain", FORWARD_BUDGET_LABEL):
        row = rows.get(variant)
        if row and full_1:
            lines.append(_step_ratio(variant, row, full_1["step"], STEP_TARGET_FULL, "FullTrain's (batch 1, like for like)"))
        if row and full_b and full_b is not full_1:
            ratio = full_b["seconds"]["training"] / row["seconds"]["training"]
            lines.append(f"  - Training time for the same passes over the support set against FullTrain at batch "
                         f"{config.full_train_batch} (the accuracy section's setting): {ratio:.1f}x "
                         f"({row['seconds']['training']:.2f} vs {full_b['seconds']['training']:.2f} s); per step "
                         f"{full_b['step'] / row['step']:.0f}x, not like for like.")
    for label, how in (("TinyTrain" + PROTOCOL_SUFFIX, "the paper's Table 8 protocol"),
                       ("TinyTrain", "as in the accuracy section" if config.epochs is None else
                        "the paper's Table 8 protocol, as in the accuracy section")):
        row = rows.get(label)
        if row:
            share = row["selection_share"]
            lines.append(f"- Selection ≤ {SELECTION_TARGET:.0%} of TinyTrain's end-to-end time ({how}): "
                         f"{_verdict(share <= SELECTION_TARGET)} ({share:.1%}: "
                         f"{row['seconds']['fisher_selection']:.3f} of {row['end_to_end']:.3f} s).")
    tiny_protocol = rows.get("TinyTrain" + PROTOCOL_SUFFIX)
    full_protocol = rows.get("FullTrain" + PROTOCOL_SUFFIX)
    if tiny_protocol and full_protocol:
        lines.append(_step_ratio("TinyTrain" + PROTOCOL_SUFFIX, tiny_protocol, full_protocol["step"], STEP_TARGET_FULL,
                                 "FullTrain" + PROTOCOL_SUFFIX))
    if peer:
        for variant in ("TinyTrain", FORWARD_BUDGET_LABEL, "TinyTrain" + PROTOCOL_SUFFIX):
            row = rows.get(variant)
            if row:
                lines.append(_step_ratio(variant, row, peer["step_median"], STEP_TARGET_PEER, "the TF-recipe peer",
                                         f", batch 1; peer ran on {peer['runner']}"))
    elif tiny:
        lines.append("- TF-recipe peer: not run (`tf_recipe` off).")
    infer = timing["infer"]
    if tiny and infer:
        lines.append(f"- Why the step ratios are bounded here: every train step runs the full forward pass "
                     f"({infer * 1e3:.1f} ms at batch 1), which is {infer / tiny['step']:.0%} of TinyTrain's step; "
                     "sparse updates only shrink the backward part, so on this 64x64 model the ratio to a "
                     "same-batch full update cannot exceed (forward + full backward) / forward. Each selected "
                     "layer also adds a fixed cost (its update runs in a TFLite IF branch whose tensors are "
                     "re-planned at every call), so the step grows with the number of selected layers more "
                     "than with their MACs.")


def _targets(config: BenchConfig, results: Mapping, runs: dict | None, timing: dict | None, lines: list[str]) -> None:
    lines += ["## Targets of the issue", ""]
    if runs:
        for key, run in runs.items():
            lines.append(f"**{run['label']} px**" + (" (the new default: the issue's targets apply)"
                                                     if run["backbone"] == LITE0 else " (for comparison)")
                         + ("" if run.get("stage", "done") == "done" else " (unfinished run: on the tasks done so far)")
                         + ":")
            lines.append("")
            for v in run["summary"]["targets"]:
                b = "ImageNet-only / not meta-trained TinyTrain" if v["b"] == NO_META else None
                lines.append("- " + verdict_sentence({**v, "a": "meta-trained TinyTrain" if v["b"] == NO_META
                                                      else v["a"]}, b))
            if not run["meta_trained"]:
                lines.append("- meta-trained ≥ ImageNet-only + 3 pp with TinyTrain: **not measured**: no meta-trained "
                             "weights for this backbone were given to this run.")
            lines.append("")
    elif "accuracy" in results["sections"] or results.get("partial"):
        lines.append("- Accuracy targets: no means yet (unfinished run).")
    else:
        lines.append("- Accuracy targets: accuracy section not run.")
    if timing:
        _timing_targets(config, timing, lines)
    else:
        lines.append("- Timing targets: timing section not run.")
    lines.append("")


def render_report(config: BenchConfig, results: Mapping) -> str:
    """BENCHMARKS.md: header (command, machine, versions, N), one section per run section, targets."""
    env = results["environment"]
    lines = ["# Benchmarks (generated; do not edit)", "",
             "Command: " + "; then, rerunning some sections and keeping the others: ".join(
                 f"`{c or 'run_benchmarks(config)'}`" for c in results.get("commands") or [results.get("command")])
             + " (resolved config: `config.json`; every number: `results.json`).", "",
             f"Machine: {env['cpu']}, {env['cores']} usable core(s), {env['os']}. Versions: python {env['python']}, "
             f"numpy {env['numpy']}, TensorFlow {env['tensorflow']}, interpreter `{env['interpreter_module']}` "
             f"{env['interpreter_version']}."
             + ("" if env.get("load_average") is None else f" Load average at the start: {env['load_average']:.1f}.")
             + f" Wall time: {results['wall_seconds'] / 60:.1f} min "
             f"({', '.join(f'{k} {v / 60:.1f}' for k, v in results['section_seconds'].items())} min).", ""]
    if results.get("partial"):
        lines += ["**Unfinished run**: what has finished so far (rendered from `results.json` and `tasks/`); rerun "
                  "the same command to finish it (finished adaptations are kept).", ""]
    default = BenchConfig()
    if config.tasks < default.tasks:
        lines += [f"**A reduced run: N = {config.tasks} tasks per target, below the default N = {default.tasks}**, "
                  f"{config.tuning_tasks} validation task(s) per target, rates {list(config.learning_rates)} x epochs "
                  f"{list(config.epochs_grid)}: the CIs are correspondingly wide. `make bench` runs the defaults "
                  "(its estimated wall time, from the per-task costs measured here, is at the end of section 1).", ""]
    average = timing = None
    if "accuracy" in results["sections"]:
        average = _accuracy_section(config, results, lines)
    if "backward_cost" in results["sections"]:
        _cost_section(config, results, lines)
    if "timing" in results["sections"]:
        timing = _timing_section(config, results, lines)
    if "ablations" in results["sections"]:
        _ablation_section(config, results, lines)
    if "plots" in results["sections"]:
        files = results["sections"]["plots"]["files"]
        lines += ["## 5. Plots", ""]
        for name, file in files.items():
            if name.startswith("accuracy_vs_compute/"):
                lines += [f"Average accuracy vs backward MACs, {name.split('/', 1)[1]}; circle area = backward memory "
                          "(the paper's Figure 1):", "", f"![accuracy vs compute]({file})", ""]
        task = results["sections"]["plots"]["fisher_task"]
        lines += [f"Per-layer Fisher potential and Eq. 3 score on one {task['target']} task; TinyTrain chose "
                  f"{', '.join(task['chosen']) or 'nothing'}:", "", f"![fisher layers]({files['fisher_layers']})", ""]
    _targets(config, results, average, timing, lines)
    return "\n".join(lines) + "\n"
