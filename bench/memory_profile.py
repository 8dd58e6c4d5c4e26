"""Where the resident memory of ``predict`` and ``adapt`` goes, by phase, on each runtime (issue 43).

Each command runs in a fresh process per runtime: ai-edge-litert from the main env, tflite-runtime 2.14
from the Pi env (which has no TensorFlow; the worker records whether anything imported it). The worker
runs the real command (``tflite_train.cli.main``: ``adapt`` with the default protocol, then ``predict``
with the checkpoint it wrote) with probes that read the process's peak and current resident set size
(``VmHWM``/``VmRSS``, ``tflite_train.runtime.peak_memory``), and the resident set's parts by kind (anonymous,
file-backed, shared memory: ``worker_process.resident_kinds_kib``), after each phase: the imports, opening the
model, reading the images, every interpreter call (a run of consecutive calls of one signature is two
phases: its first call, which allocates the signature, and the rest), saving the checkpoint, the exit.
A third worker measures the Python API alone: open the model, one batch-1 ``infer``, then the median
time of further batch-1 calls.

``--before DIR`` adds columns measured on an older ``tflite_train`` package (a directory holding only
that package, e.g. ``git archive main tflite_train | tar -x -C DIR``; ``--before-model``: a file it
exported), in the same run; with ``--rounds R`` the runs alternate R times, so that the times of before
and now see the same machine load (times: medians over the rounds; memory: the round with the highest
peak, which is nearly the same in every round).

Support set: 5 classes x 5 images, queries 5 x 2 (``STAMP_CLASSES``: the first 7 stamps of each class of
the Debian package tuxpaint-stamps-default, installed by ``make data-deps``), or ``--support``/``--query``.

    make bench-memory   # exports the default model, then:
    PYTHONPATH=$PWD .venv/bin/python -m bench.memory_profile --model build/memory/lite0_default.tflite \\
        --out bench/results/MEMORY.md
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.memory_worker import worker
from bench.table_output import emit, markdown_table
from bench.worker_process import ROOT, worker_command, worker_env

__all__ = ["COMMANDS", "GOALS_MIB", "merge_phase_keys", "phases", "prepare_images", "render", "main"]

LOG = logging.getLogger(__name__)
COMMANDS = ("predict", "adapt")
GOALS_MIB = {"predict": 128, "adapt": 160}
"""Issue 43's peak-RSS goals of the default export, MiB."""
ENVIRONMENTS = {"litert": ".venv/bin/python", "tflite-runtime": ".venv-pi/bin/python"}
"""Runtime (``tflite_train.runtime.RUNTIMES`` name) -> its env's python, relative to the checkout."""
STAMPS = pathlib.Path("/usr/share/tuxpaint/stamps")
STAMP_CLASSES = ("animals/birds", "food/fruit", "plants/flowers", "town/roadsigns", "food/vegetables")
SHOTS, QUERIES = 5, 2
MIB = 2**20


# ----------------------------------------------------------------------------------------------- images
def prepare_images(out: pathlib.Path, stamps: pathlib.Path = STAMPS) -> tuple[pathlib.Path, pathlib.Path]:
    """(support, query) folders ``out/{support,query}/<class>/``: of each ``STAMP_CLASSES`` folder's PNGs in
    name order, the first ``SHOTS`` as support and the next ``QUERIES`` as queries.

    Raises:
      FileNotFoundError: a class folder is missing or has too few PNGs (install tuxpaint-stamps-default).
    """
    support, query = out / "support", out / "query"
    for folder in (support, query):
        shutil.rmtree(folder, ignore_errors=True)
    for name in STAMP_CLASSES:
        files = sorted((stamps / name).glob("*.png"))
        if len(files) < SHOTS + QUERIES:
            raise FileNotFoundError(f"{stamps / name}: {len(files)} PNG stamps, {SHOTS + QUERIES} needed (install the "
                                    "Debian package tuxpaint-stamps-default: make data-deps), or give --support/--query")
        label = pathlib.PurePath(name).name
        for folder, picked in ((support, files[:SHOTS]), (query, files[SHOTS:SHOTS + QUERIES])):
            (folder / label).mkdir(parents=True)
            for path in picked:
                shutil.copyfile(path, folder / label / path.name)
    return support, query


# ----------------------------------------------------------------------------------------------- tables
def phases(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The events as phases, each with the peak after it, its increase of the peak (the first phase's
    increase is its peak) and its seconds. A run of consecutive ``call <signature>`` events is two
    phases: its first call ("<signature>: first call" the first time the signature runs since the model was
    opened or reopened, which allocates it, else "<signature>") and the rest ("<signature> (n more calls)")."""
    out: list[dict[str, Any]] = []
    called: set[str] = set()
    previous_peak, previous_seconds, i = 0, 0.0, 0
    while i < len(events):
        phase = events[i]["phase"]
        if phase == "reopen model":  # a new interpreter: every signature is allocated anew
            called.clear()
        j = i + 1
        runs = [(phase, events[i])]
        if phase.startswith("call "):
            signature = phase[len("call "):]
            while j < len(events) and events[j]["phase"] == phase:
                j += 1
            runs = [(signature if signature in called else f"{signature}: first call", events[i])]
            called.add(signature)
            more = sum(e.get("calls", 1) for e in events[i + 1:j])
            if more:
                runs.append((f"{signature} ({more} more call{'s' if more > 1 else ''})", events[j - 1]))
        for label, event in runs:
            out.append({"phase": label, "peak_kib": event["peak_kib"], "rss_kib": event.get("rss_kib"),
                        "kinds_kib": event.get("kinds_kib"),
                        "increase_kib": event["peak_kib"] - previous_peak,
                        "seconds": event["seconds"] - previous_seconds})
            previous_peak, previous_seconds = event["peak_kib"], event["seconds"]
        i = j
    return out


def merge_phase_keys(sequences: Sequence[Sequence[str]]) -> list[tuple[str, int]]:
    """One row order for several runs' phase lists: keys (label, occurrence), each run's order kept, a key
    missing from earlier runs placed after the key that precedes it in its own run."""
    keys: list[tuple[str, int]] = []
    for labels in sequences:
        seen: dict[str, int] = {}
        after = -1
        for label in labels:
            key = (label, seen.get(label, 0))
            seen[label] = key[1] + 1
            if key in keys:
                after = keys.index(key)
            else:
                after += 1
                keys.insert(after, key)
    return keys


def _mib(kib: float | None) -> str:
    return "" if kib is None else f"{kib / 1024:.0f}"


def _phase_rows(runs: Sequence[Mapping[str, Any]], command: str) -> tuple[list[tuple[str, int]], list[dict]]:
    """(row keys in one order, per run {key: phase}) of ``command``'s phases (``phases``, ``merge_phase_keys``)."""
    per_run = [phases(run[command]["events"]) for run in runs]
    keys = merge_phase_keys([[p["phase"] for p in ps] for ps in per_run])
    lookup = []
    for ps in per_run:
        seen: dict[str, int] = {}
        table = {}
        for p in ps:
            table[(p["phase"], seen.get(p["phase"], 0))] = p
            seen[p["phase"]] = seen.get(p["phase"], 0) + 1
        lookup.append(table)
    return keys, lookup


def _phase_grid(runs: Sequence[Mapping[str, Any]], command: str, columns: Sequence[str],
                cells: Callable[[Mapping[str, Any]], list[str]]) -> list[str]:
    """A table of ``command``'s phases (rows, ``_phase_rows``) by run: per run the ``columns`` (the first one
    titled with the run's label), filled by ``cells(phase)`` (blank where the run has no such phase)."""
    keys, lookup = _phase_rows(runs, command)
    rows = []
    for key in keys:
        row = [key[0] if key[1] == 0 else f"{key[0]} [{key[1] + 1}]"]
        for table in lookup:
            p = table.get(key)
            row += [""] * len(columns) if p is None else cells(p)
        rows.append(row)
    header = ["phase", *(cell for run in runs for cell in (f"{run['label']}: {columns[0]}", *columns[1:]))]
    return markdown_table(header, rows, align="l" + "r" * len(columns) * len(runs))


def _phase_table(runs: Sequence[Mapping[str, Any]], command: str) -> list[str]:
    return _phase_grid(runs, command, ("peak", "+"), lambda p: [_mib(p["peak_kib"]), _mib(p["increase_kib"])])


KINDS = ("anon", "file", "shmem")
"""The resident set's kinds (``worker_process.RESIDENT_KINDS``) in the order the kind table shows them."""


def _kinds_table(runs: Sequence[Mapping[str, Any]], command: str) -> list[str]:
    """Per phase and run, the resident set after the phase (``VmRSS``) and its parts by kind, MiB; empty when no
    run recorded the kinds."""
    runs = [run for run in runs if any(e.get("kinds_kib") for e in run[command]["events"])]
    if not runs:
        return []

    def cells(p: Mapping[str, Any]) -> list[str]:
        kinds = p.get("kinds_kib") or {}
        return [_mib(p.get("rss_kib")), *(_mib(kinds.get(kind)) for kind in KINDS)]

    return _phase_grid(runs, command, ("RSS", *KINDS), cells)


def _peak(run: Mapping[str, Any], command: str) -> int:
    return run[command]["events"][-1]["peak_kib"]


def _api_phase(run: Mapping[str, Any], phase: str) -> int | None:
    return next((e["peak_kib"] for e in run["api"]["events"] if e["phase"] == phase), None)


def render(report: Mapping[str, Any]) -> str:
    """MEMORY.md: the summary against the goals, the times, then ``predict`` and ``adapt`` by phase."""
    runs = report["runs"]
    labels, align = ["", *(run["label"] for run in runs)], "l" + "r" * len(runs)
    lines = ["# Peak resident memory of `predict` and `adapt` (issue 43)", "",
             f"Command: `{report['command']}`{' (`make bench-memory`)' if report.get('make') else ''}.", "",
             f"Model: `{report['model']}` ({report['model_bytes'] / MIB:.1f} MiB)"
             + (f"; before: `{report['before_model'] or report['model']}` run by the `tflite_train` in "
                f"`{report['before']}`" if report.get("before") else "")
             + f". Support {report['support_size']} images of {len(STAMP_CLASSES)} classes, "
             f"{report['query_size']} queries. Rounds: {report['rounds']}. Machine: {report['machine']}.", "",
             "Peak RSS = `VmHWM` of the command's own process (MiB = 2^20 bytes), read at its exit; the "
             "Python API rows: after opening the model and after its first batch-1 `infer`.", "",
             "## Peak RSS (MiB)", ""]

    def row(label: str, cell, *more: str) -> list[str]:
        return [label, *(cell(run) for run in runs), *more]

    def peak(command: str):
        goal = GOALS_MIB[command] * 1024
        return lambda run: f"{_mib(_peak(run, command))} {'met' if _peak(run, command) <= goal else 'missed'}"

    lines += markdown_table([*labels, "goal"], [
        *(row(f"`{command}`", peak(command), f"<= {GOALS_MIB[command]}") for command in COMMANDS),
        row("API: open the model", lambda run: _mib(_api_phase(run, "open model")), ""),
        row("... after the first batch-1 `infer`", lambda run: _mib(_api_phase(run, "first infer")), ""),
        row("TensorFlow imported", lambda run: "yes" if any(run[c]["tensorflow_imported"] for c in ("api", *COMMANDS))
            else "no", "")], align=align + "l")
    lines += ["", f"## Time (median over {report['rounds']} interleaved round(s))", ""]
    lines += markdown_table(labels, [
        row("`infer`, batch 1 (ms)", lambda run: f"{run['api']['infer_ms']:.2f}"),
        row("`adapt` training (s)", lambda run: f"{run['adapt']['adapt_seconds']['training']:.2f}"),
        row("`adapt` total (s)", lambda run: f"{run['adapt']['adapt_seconds']['total']:.2f}"),
        row("`predict` command (s)", lambda run: f"{run['predict']['predict_seconds']:.2f}"),
        row("`adapt` query accuracy", lambda run: "" if run["adapt"].get("query_accuracy") is None
            else f"{run['adapt']['query_accuracy']:.2f}")], align=align)
    for command in COMMANDS:
        lines += ["", f"## `{command}` by phase (peak RSS after the phase, and its increase, MiB)", "",
                  *_phase_table(runs, command)]
    kinds = _kinds_table([run for run in runs if run.get("variant", "now") == "now"], "adapt")
    if kinds:
        lines += ["", "## `adapt` by phase: what is resident (MiB, after the phase)", "",
                  "`VmRSS` and its parts (`/proc/self/status`): `anon` anonymous memory (the heap: Python objects, "
                  "the model's bytes, interpreter arenas and state), `file` file-backed pages (mapped libraries), "
                  "`shmem` shared memory (LiteRT's in-memory XNNPACK weight cache). Peaks within a phase "
                  "(the tables above) can lie higher.", "", *kinds]
    lines += ["", "## Runtimes", ""]
    lines += [f"- {run['label']}: {run['adapt']['environment']['interpreter_module']} "
              f"{run['adapt']['environment']['interpreter_version']}, numpy {run['adapt']['environment']['numpy']}, "
              f"python {run['adapt']['environment']['python']} (`{run['python']}`)" for run in runs]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------- driver
def run_worker(python: str, spec: Mapping[str, Any], library: str | None = None) -> dict[str, Any]:
    """Runs ``worker(spec)`` in a fresh ``python`` process (``library`` first on its path); its JSON result."""
    done = subprocess.run(worker_command(python, "bench.memory_profile", "--worker", json.dumps(spec)),
                          cwd=ROOT, capture_output=True, text=True, env=worker_env(library))
    if done.returncode != 0:
        raise RuntimeError(f"{spec['kind']} worker ({python}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _pythons(given: Sequence[str]) -> dict[str, str]:
    pythons = {runtime: str(ROOT / path) for runtime, path in ENVIRONMENTS.items()}
    for item in given:
        runtime, _, python = item.partition("=")
        if runtime not in ENVIRONMENTS or not python:
            raise SystemExit(f"--python {item!r}: expected RUNTIME=PATH with RUNTIME one of {', '.join(ENVIRONMENTS)}")
        pythons[runtime] = python
    missing = [r for r, p in pythons.items() if not pathlib.Path(p).exists()]
    for runtime in missing:
        LOG.warning("%s: no python at %s; skipped (give --python %s=PATH)", runtime, pythons[runtime], runtime)
    if len(missing) == len(pythons):
        raise SystemExit("no runtime env found; give --python RUNTIME=PATH")
    return {r: p for r, p in pythons.items() if r not in missing}


RUNTIME_LABELS = {"litert": "LiteRT", "tflite-runtime": "tflite-runtime"}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", help="the exported model (the default: `tflite-train export`)")
    parser.add_argument("--before", help="directory holding an older tflite_train package: adds its columns")
    parser.add_argument("--before-model", help="the model the --before code runs (default: --model)")
    parser.add_argument("--python", action="append", default=[], metavar="RUNTIME=PATH",
                        help=f"python of a runtime's env (default: {ENVIRONMENTS})")
    parser.add_argument("--support", help="support folder DIR/<class>/<image> (default: tuxpaint stamps)")
    parser.add_argument("--query", help="query folder (with --support)")
    parser.add_argument("--work", default=str(ROOT / "build" / "memory_profile"), help="scratch folder")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (times: medians)")
    parser.add_argument("--out", help="MEMORY.md to write (and .json beside it); default: print")
    parser.add_argument("--make", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    logging.basicConfig(level=logging.INFO, format="memory_profile: %(message)s")
    if not args.model:
        parser.error("--model is required")
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.support:
        support, query = pathlib.Path(args.support), pathlib.Path(args.query or args.support)
    else:
        support, query = prepare_images(work / "images")
    images = sorted(str(p) for p in query.glob("*/*") if p.is_file())
    variants = [("before", args.before, args.before_model or args.model)] if args.before else []
    variants.append(("now", None, args.model))
    runs = [{"label": f"{RUNTIME_LABELS[runtime]}{' ' + name if args.before else ''}", "variant": name,
             "runtime": runtime, "python": python, "library": library, "model": str(model)}
            for runtime, python in _pythons(args.python).items() for name, library, model in variants]
    results: list[dict[str, list[dict]]] = [{"api": [], "adapt": [], "predict": []} for _ in runs]
    for r in range(args.rounds):
        for run, result in zip(runs, results):
            checkpoint = work / f"{run['runtime']}_{run['variant']}.ckpt"
            spec = {"runtime": run["runtime"], "model": run["model"], "support": str(support), "query": str(query),
                    "checkpoint": str(checkpoint), "images": images}
            for kind in ("api", "adapt", "predict"):
                result[kind].append(run_worker(run["python"], {**spec, "kind": kind}, run["library"]))
            LOG.info("round %d %s: predict %s MiB, adapt %s MiB", r + 1, run["label"],
                     _mib(result["predict"][-1]["events"][-1]["peak_kib"]),
                     _mib(result["adapt"][-1]["events"][-1]["peak_kib"]))
    for run, result in zip(runs, results):
        for kind, rounds in result.items():
            chosen = dict(max(rounds, key=lambda got: got["events"][-1]["peak_kib"]))
            for key in ("infer_ms", "predict_seconds"):
                if key in chosen:
                    chosen[key] = statistics.median(got[key] for got in rounds)
            if "adapt_seconds" in chosen:
                chosen["adapt_seconds"] = {k: statistics.median(got["adapt_seconds"][k] for got in rounds)
                                           for k in chosen["adapt_seconds"]}
            run[kind] = chosen
    command = "python -m bench.memory_profile " + " ".join(argv if argv is not None else sys.argv[1:])
    report = {"command": command.replace(" --make", ""), "make": args.make, "model": args.model,
              "model_bytes": os.path.getsize(args.model), "before": args.before, "before_model": args.before_model,
              "support_size": sum(1 for p in support.glob("*/*") if p.is_file()), "query_size": len(images),
              "rounds": args.rounds, "machine": _machine(), "runs": runs}
    if args.out:
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        emit(json.dumps(report, indent=1) + "\n", str(pathlib.Path(args.out).with_suffix(".json")))
    emit(render(report), args.out)
    return 0


def _machine() -> str:
    from bench.environment import environment

    env = environment("")
    return f"{env['cpu']}, {env['cores']} usable cores, {env['os']}"


if __name__ == "__main__":
    sys.exit(main())
