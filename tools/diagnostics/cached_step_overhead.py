"""Where a TinyTrain step from the cached cut spends its time: the step with nothing, one layer or
the policy's whole selection updated, against ``infer``, the prefix and the forward above the cut.

A step from the cache at ``<cut>`` runs the forward above the cut (``infer_from_<cut>``), the loss, the input
gradients down to the cut and, per selected layer, its weight gradient and masked optimizer step. Timing the
same step with an all-zero selection mask separates the part every step pays, whatever is selected, from the
part each selected layer adds (issue 26: the goal is a cached step <= 0.75x ``infer`` on LiteRT).

    python -m tools.diagnostics.cached_step_overhead --model M.tflite [--cache build/data_cache] [--out bench/results/CACHED_STEP_OVERHEAD.md]

The model must have cached-cut signatures (``tools.diagnostics.step_ratios`` exports one). One interpreter
thread; pin the process (``taskset -c 0``) on a quiet machine; medians of ``--repeats`` calls, the lowest of
``--rounds`` interleaved rounds. Numpy and an interpreter only.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from collections.abc import Sequence

import numpy as np

from bench.call_timing import median_seconds
from bench.table_output import emit, markdown_table

__all__ = ["CachedStep", "Timing", "add_model_arguments", "cached_step", "main", "measure", "policy_selection",
           "render"]


@dataclasses.dataclass(frozen=True)
class Timing:
    """One timed call: ``label`` (what ran) and its time in seconds."""

    label: str
    seconds: float


def render(model: str, cut: str, timings: Sequence[Timing], command: str = "", load: str = "") -> str:
    """A Markdown table of ``timings`` in ms and as a multiple of the ``infer`` row (pure).

    The summary line gives the step with nothing selected against the forward above the cut (its fixed
    part) and what each selected layer adds on average, when those rows exist.

    Raises:
      ValueError: no ``infer`` row.
    """
    by_label = {t.label: t.seconds for t in timings}
    if "infer" not in by_label:
        raise ValueError("timings need an 'infer' row")
    base = by_label["infer"]
    lines = ["# A TinyTrain step from the cached cut, decomposed (`tools/diagnostics/cached_step_overhead.py`)", "",
             f"Model: `{model}`, cut `{cut}`." + (f" Command: `{command}`." if command else "")
             + (f" {load}" if load else ""), "",
             *markdown_table(("call", "ms", "x `infer`"),
                             ([t.label, f"{t.seconds * 1e3:.2f}", f"{t.seconds / base:.2f}"] for t in timings))]
    nothing, forward = by_label.get("step, nothing selected"), by_label.get("forward above the cut")
    if nothing is not None and forward is not None:
        lines += ["", f"A step that updates nothing costs {nothing / forward:.1f}x the forward above the cut "
                  f"({nothing * 1e3:.2f} vs {forward * 1e3:.2f} ms): the part of every step that no selection removes."]
    singles = [t.seconds for t in timings if t.label.startswith("step, one layer")]
    if nothing is not None and singles:
        lines.append(f"One selected layer adds {(min(singles) - nothing) * 1e3:.2f}-{(max(singles) - nothing) * 1e3:.2f} ms.")
    return "\n".join(lines) + "\n"


def policy_selection(model, xs: np.ndarray, ys: np.ndarray) -> dict[str, np.ndarray]:
    """The TinyTrain policy's selection on the support set (xs, ys) at the library's budgets (B_mem scaled to
    the model, B_compute 15 % of the full backward, a quarter of a layer's channels), without training; the
    model is left with the support set's head and its untrained weights."""
    from tflite_train.runtime import AdaptConfig, layer_table
    from tflite_train.runtime.adaptation.trainer import adapt
    from tflite_train.sparse import scaled_memory_budget
    from tflite_train.sparse.cost_model import full_backward_macs

    table = layer_table(model.metadata)
    config = AdaptConfig(policy="tinytrain", memory_bytes=scaled_memory_budget(table), compute_fraction=None,
                         compute_macs=0.15 * full_backward_macs(table), iterations=0, batch_size=1, channel_ratio=0.25)
    return {n: np.asarray(c) for n, c in adapt(model, xs, ys, config).selection.channels.items()}


@dataclasses.dataclass(frozen=True)
class CachedStep:
    """A model set up for cached steps on one support image (``cached_step``).

    Attributes:
      model: The ``TrainableModel``, with the support set's head, untrained weights and ``selection`` set.
      selection: The TinyTrain policy's selection (``policy_selection``).
      cut: The cache cut that selection trains from.
      image, label: The first support image [1, H, W, C] and its label [1].
      activation: ``image``'s activation at the cut (the cached input of the step).
    """

    model: object
    selection: dict[str, np.ndarray]
    cut: object
    image: np.ndarray
    label: np.ndarray
    activation: np.ndarray


def cached_step(model_path: str, cache: str) -> CachedStep:
    """Opens ``model_path`` (one interpreter thread) on a 5-way 5-shot fashion_mnist support set, sets the
    policy's selection and caches the first image's activation at its cut.

    Raises:
      ValueError: the model has no cached-cut signatures for that selection.
    """
    from tools.diagnostics.step_ratios import support_set
    from tflite_train.runtime import TrainableModel

    model = TrainableModel(model_path, num_threads=1)
    xs, ys, _, _ = support_set(model, cache)
    selection = policy_selection(model, xs, ys)
    model.set_selection(selection)
    cut = model.cache_cut()
    if cut is None:
        raise ValueError(f"{model_path}: no cached-cut signatures for the policy's selection")
    return CachedStep(model, selection, cut, xs[:1], ys[:1], model.features(cut, xs[:1]))


def measure(model_path: str, cache: str, repeats: int, rounds: int) -> tuple[str, list[Timing]]:
    """Times the calls of the module docstring on a 5-way 5-shot fashion_mnist support set; returns the cut
    and the timings (the lowest of ``rounds`` medians each)."""
    def timed(call) -> float:
        return median_seconds(call, repeats, warm_up=1)[0]

    setup = cached_step(model_path, cache)
    model, selection, cut = setup.model, setup.selection, setup.cut
    image, label, activation = setup.image, setup.label, setup.activation
    state = model.get_state()  # the head of the support set, untrained weights (set_selection replaces the masks)
    top = [n for n in model.candidates if n in ("b15_depthwise", "b15_expand")] or list(model.candidates[-1:])
    deepest = min(selection, key=model.candidates.index) if selection else None
    steps = {"step, nothing selected": np.zeros_like(model.selection_mask(selection))}
    for name in dict.fromkeys([*top, *([deepest] if deepest else [])]):
        steps[f"step, one layer: {name} at 1/4"] = {name: np.arange(max(1, model.candidate_channels[name] // 4))}
    steps["step, the policy's selection (" + ", ".join(f"{n} {len(c)}" for n, c in selection.items()) + ")"] = selection
    calls = {"infer": lambda: model.infer(image), f"prefix (features_{cut.layer})": lambda: model.features(cut, image),
             "forward above the cut": lambda: model.infer_from(cut, activation)}
    best: dict[str, float] = {}
    for _ in range(rounds):
        for label_, call in calls.items():
            best[label_] = min(best.get(label_, float("inf")), timed(call))
        for label_, chosen in steps.items():
            model.set_state(state)
            model.set_selection(chosen)
            best[label_] = min(best.get(label_, float("inf")),
                               timed(lambda: model.train_step_from(cut, activation, label)))
    return cut.layer, [Timing(k, v) for k, v in best.items()]


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model`` (an export with cached-cut signatures) and ``--cache`` (the support set's data)."""
    parser.add_argument("--model", required=True, help="an exported .tflite with cached-cut signatures")
    parser.add_argument("--cache", default="build/data_cache", help="data cache (tflite-train data prepare)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A cached TinyTrain step's time, decomposed")
    add_model_arguments(parser)
    parser.add_argument("--repeats", type=int, default=200, help="timed calls per median (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the lowest median is kept")
    parser.add_argument("--out", help="write the Markdown table here (default: print it)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.rounds < 1:
        parser.error("--repeats and --rounds must be >= 1")
    start = os.getloadavg()[0]
    cut, timings = measure(args.model, args.cache, args.repeats, args.rounds)
    load = (f"One interpreter thread; medians of {args.repeats} calls, the lowest of {args.rounds} rounds; "
            f"load average {start:.2f} (start) / {os.getloadavg()[0]:.2f} (end).")
    command = "python -m tools.diagnostics.cached_step_overhead " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(args.model, cut, timings, command, load)
    emit(text, args.out)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    raise SystemExit(main())
