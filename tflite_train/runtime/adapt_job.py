"""The file-level edge of adaptation (used by the CLI): image folders in, one checkpoint file out.

``run_adaptation`` checks everything before it trains or writes: the config, the output paths
(``output_path.check_output_file``: not a directory, folder writable, enough free space), then takes
the output's lock (``output_lock.output_lock``: a second run into the same output stops there, with
nothing written), then the model and the images. It adapts and writes ONE file atomically: the
checkpoint, holding the resolved config (inputs, flags) and the report (selection, cost vs budget,
per-phase seconds, losses, support/query accuracy, the process's peak resident memory) of the run
(``checkpoint`` module docstring). A failure or a kill at any moment leaves any earlier file at ``out`` untouched and complete;
``run_record`` reads the config and report back (``tflite-train show``).

``start_from`` continues from an earlier checkpoint (``continual``: its state and classes, the support folder's
new classes and new images of known ones, its replay memory) and writes a NEW file: ``out`` must differ from it,
and the old file is only read. Every run keeps a replay memory of its support images under ``replay_budget``
bytes in the checkpoint it writes (``replay_memory``; 0: none).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import pathlib
import stat
import time
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.adaptation.adapt_config import AdaptConfig
from tflite_train.runtime.adaptation.continual import AdaptStart, checkpoint_after, continue_from, describe_start
from tflite_train.runtime.adaptation.free_memory import release_free_memory
from tflite_train.runtime.adaptation.prediction import class_logits, evaluate
from tflite_train.runtime.adaptation.progress import Progress, no_progress
from tflite_train.runtime.adaptation.replay_memory import DEFAULT_REPLAY_BUDGET_BYTES, ReplayMemory, layers_above
from tflite_train.runtime.adaptation.phases import SELECTION_SIGNATURES
from tflite_train.runtime.adaptation.trainer import adapt, check_labelled_set
from tflite_train.runtime.checkpoint.checkpoint import Checkpoint, load_checkpoint, restore_checkpoint, save_checkpoint
from tflite_train.runtime.errors import ImageFolderError, UserError
from tflite_train.runtime.images.image_folder import scan_image_folder
from tflite_train.runtime.images.model_input import load_images
from tflite_train.runtime.model.adapted_constants import INFERENCE_SIGNATURES, ConstantLayoutError, adapted_constants_edit
from tflite_train.runtime.model.interpreter import TrainableModel
from tflite_train.runtime.model.model_contract import check_metadata, input_range, layer_table
from tflite_train.runtime.model.runtimes import resolve_runtime
from tflite_train.runtime.output_lock import output_lock
from tflite_train.runtime.output_path import check_output_file
from tflite_train.runtime.peak_memory import resident_memory
from tflite_train.runtime.report_schema import check_run_report
from tflite_train.runtime.text import printable
from tflite_train.sparse.budget import Budget, admitting_budget, scaled_memory_budget
from tflite_train.sparse.cost_model import layer_cost
from tflite_train.sparse.policies import policy_spec

DOCUMENT_RESERVE_BYTES = 2**20  # the config and report stored in the checkpoint, generously
COMMAND_MAX_ROWS = 1
"""Images per ``infer``/``features`` call of ``adapt`` and ``predict`` (``TrainableModel.max_rows``): the
interpreter keeps a signature's tensors sized for the largest batch it ran (EfficientNet-Lite0@128:
``features`` at 32 images +112 MiB peak RSS, ``infer`` at 25 +60 MiB), while the time per image is
the same from 1 to 32 images (measured on both runtimes; ``bench/results/MEMORY.md``). One image rather
than 4: ``adapt``'s peak on tflite-runtime 2.14 229 -> 210 MiB (``infer``'s first call +11 -> +4 MiB),
with ``infer`` and ``features`` outputs bit for bit those of 4-image calls (measured on both runtimes)."""
COMMAND_FISHER_ROWS = 1
"""Most images per ``fisher`` call of ``adapt`` (``AdaptConfig.fisher_chunk_size``, whose library default
the benchmark's recorded configs keep): the interpreter keeps a call's activations and gradients for the
rest of the run. On EfficientNet-Lite0@128 with LiteRT's weight cache, 1 instead of 4 images: the command's
peak RSS 318-323 -> 297 MiB, the Fisher pass of 25 images 0.09 -> 0.13 s, the same selection and losses
(the potentials agree to 2e-6 relative: float rounding of the chunk means)."""
LOG = logging.getLogger(__name__)


def load_model(model_path: str | os.PathLike, runtime: str | None = None,
               signatures: Collection[str] | None = None, without_slots: bool = False) -> TrainableModel:
    """Opens an exported model on ``runtime`` (a ``runtimes.RUNTIMES`` name; None = the first installed),
    on only ``signatures`` (None: all), with ``without_slots`` its optimizer slots unset until ``set_state`` or
    ``reset_state`` (``TrainableModel.unset_state``: nothing can train on it before), and checks its metadata
    (ValueError naming the file otherwise)."""
    module = resolve_runtime(runtime)
    _require_regular_file(model_path, "model file")
    model = TrainableModel(pathlib.Path(model_path), runtime=module, max_rows=COMMAND_MAX_ROWS, signatures=signatures,
                           unset_state=TrainableModel.slot_names if without_slots else None)
    check_metadata(model.metadata)
    return model


def open_adapted(model_path: str | os.PathLike, checkpoint: Checkpoint | str | os.PathLike,
                 runtime: str | None = None) -> tuple[TrainableModel, Checkpoint]:
    """(model, checkpoint): the model with ``checkpoint`` applied, for classifying only: the inference-only
    model (``adapted_constants``: the adapted weights in the exported constants, ``infer`` and ``set_head``
    opened, the head set) when the file is laid out for it, else the whole model restored through the
    contract (``restore_checkpoint``). Errors come in the whole model's order: the model file, its
    metadata, then the checkpoint (read only then) and whether it fits the model (CheckpointError).
    """
    module = resolve_runtime(runtime)
    _require_regular_file(model_path, "model file")
    loaded = [checkpoint] if isinstance(checkpoint, Checkpoint) else []

    def edit(data: bytearray, model: TrainableModel) -> None:
        check_metadata(model.metadata)
        if not loaded:
            loaded.append(load_checkpoint(checkpoint))
        adapted_constants_edit(loaded[0])(data, model)

    try:
        # two signatures share no constant: LiteRT's Interpreter packs each once and weighs less than the
        # CompiledModel that shares packed weights (measured: 6 MiB); one image per call holds the least
        model = TrainableModel(pathlib.Path(model_path), runtime=module, max_rows=1, weight_cache=False,
                               signatures=INFERENCE_SIGNATURES, edit=edit)
    except ConstantLayoutError as err:
        LOG.info("restoring the checkpoint through get_state/set_state: %s", err)
        model = load_model(model_path, runtime)
        return model, restore_checkpoint(model, loaded[0])
    model.set_head(loaded[0].arrays[C.PROTOTYPES])
    return model, loaded[0]


def checkpoint_bound_bytes(model: TrainableModel, include_optimizer: bool) -> int:
    """An upper bound of a checkpoint's size, from the metadata alone (no interpreter call): every
    candidate kernel and bias (x3 with the optimizer's two Adam slots) and a full head, in float32."""
    table = layer_table(model.metadata)
    weights = sum(layer_cost(table[n]).weights + table[n].out_channels for n in model.candidates)
    return 4 * (weights * (3 if include_optimizer else 1) + model.capacity * model.feature_dim)


def _require_regular_file(path: str | os.PathLike, what: str) -> None:
    """UserError unless ``path`` is a regular file (``os.stat`` only: a FIFO is never opened, so never blocks)."""
    shown = printable(os.fspath(path))
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise UserError(f"{what} {shown}: {err.strerror or err}") from err
    if not stat.S_ISREG(mode):
        raise UserError(f"{what} {shown} is not a regular file")


def _check_distinct(outputs: Sequence[pathlib.Path], inputs: Sequence[pathlib.Path]) -> None:
    """UserError if two outputs are one file, or an output would overwrite an input (the model)."""
    seen: dict[pathlib.Path, pathlib.Path] = {}
    for path in outputs:
        key = path.resolve()
        if key in seen:
            raise UserError(f"output {printable(str(path))} is also given as {printable(str(seen[key]))}; "
                            "outputs must be different files")
        seen[key] = path
        for source in inputs:
            if key == source.resolve() or (path.exists() and source.exists() and os.path.samefile(path, source)):
                raise UserError(f"output {printable(str(path))} would overwrite the input {printable(str(source))}")


def _read_folder(root: str | os.PathLike, model: TrainableModel, progress: Progress):
    folder = scan_image_folder(root)
    with progress("reading", len(folder.paths)) as bar:
        images = load_images(folder.paths, model.input_shape, input_range(model.metadata), progress=bar.update)
    return images, folder.labels, folder.class_names


def default_run_budget(model: TrainableModel, config: AdaptConfig, memory: bool, compute: bool,
                       candidates: Sequence[str] | None = None) -> tuple[AdaptConfig, Budget]:
    """``config`` with the library's default budget (``sparse.default_budget``) in the bounds the user did not
    give, and the budget before any raise (the paper's, carried to the model).

    B_mem not given (``memory``): the paper's 1 MiB for MCUNet@128 scaled to this model
    (``sparse.scaled_memory_budget``). Then, when the budget admits none of the run's candidate layers alone
    (``config.sparse_update_layers``, else ``candidates``: a continued run's layers above its replay memory's
    cut, else the model's), the bounds not given (``memory``, ``compute``) are
    raised just enough to admit one (``sparse.admitting_budget``, at the run's channel ratio, the rows one
    train-step call holds (``AdaptConfig.rows_per_call``; an episode step's support rows counted as at least
    the batch, the support set being read later) and the model's optimizer).
    """
    table = layer_table(model.metadata)
    paper = config.budget
    if memory and math.isinf(paper.memory_bytes):
        paper = dataclasses.replace(paper, memory_bytes=scaled_memory_budget(table))
    budget = admitting_budget(paper, table, config.sparse_update_layers or candidates or model.candidates,
                              channel_ratio=config.channel_ratio, optimizer=model.metadata[C.F_OPTIMIZER][C.F_NAME],
                              batch_size=config.rows_per_call(config.batch_size), raise_memory=memory,
                              raise_compute=compute).budget
    return dataclasses.replace(config, memory_bytes=budget.memory_bytes, compute_macs=budget.compute_macs,
                               compute_fraction=budget.compute_fraction), paper


def support_accuracy(model: TrainableModel, images: np.ndarray, labels: np.ndarray) -> float:
    """Accuracy of the model's current head on its own support set, in [0, 1]."""
    return evaluate(model, images, labels)


def layer_costs(model: TrainableModel) -> dict[str, dict[str, int]]:
    """Per candidate layer: its weights, forward MACs and output channels (the cost model), for plots."""
    table = layer_table(model.metadata)
    out = {}
    for name in model.candidates:
        cost = layer_cost(table[name])
        out[name] = {"weights": int(cost.weights), "forward_macs": int(cost.forward_macs),
                     "out_channels": int(table[name].out_channels)}
    return out


def run_adaptation(
    model_path: str | os.PathLike,
    support_dir: str | os.PathLike,
    out: str | os.PathLike,
    config: AdaptConfig,
    *,
    query_dir: str | os.PathLike | None = None,
    include_optimizer: bool = False,
    runtime: str | None = None,
    extra_outputs: Sequence[str | os.PathLike] = (),
    max_steps: int | None = None,
    progress: Progress = no_progress,
    default_memory_budget: bool = False,
    default_compute_budget: bool = False,
    start_from: str | os.PathLike | None = None,
    replay_budget: int = DEFAULT_REPLAY_BUDGET_BYTES,
) -> dict[str, Any]:
    """Adapts the model to ``support_dir`` and saves the checkpoint ``out``; returns the report dict.

    Args:
      model_path: The exported ``.tflite``.
      support_dir, query_dir: ``DIR/<class>/<image>`` folders (``image_folder.scan_image_folder``).
      out: The checkpoint path (the config and report are stored in it; ``<out>.lock`` exists while it runs).
      config: The adaptation config.
      include_optimizer: Store the optimizer slots too.
      runtime: A ``runtimes.RUNTIMES`` name, or None for the first installed.
      extra_outputs: Further files the caller will write afterwards (e.g. a plot): checked up front too.
      max_steps: Refuse a run of more optimizer steps than this (before any training), or None.
      progress: Progress-bar factory (``progress.terminal_progress``).
      default_memory_budget: B_mem not given (``config.memory_bytes`` is inf): a budgeted policy gets
        the library's default B_mem for this model (``default_run_budget``).
      default_compute_budget: B_compute not given (``config``'s is the protocol's default): the default
        budget rule may raise it (``default_run_budget``). With both defaults, some candidate layer always
        fits the budget.
      start_from: An earlier checkpoint of this model to continue from (``continual``), or None: its classes
        first, then the support folder's new ones (one class is enough then); ``out`` must be another file.
      replay_budget: Bytes of replay memory the new checkpoint may keep (``replay_memory``; 0: none, and a
        ``start_from`` memory is not trained on either).

    Raises:
      UserError (a ValueError) or OSError: one-line reasons; nothing is written before the checkpoint
        is complete, and the file at ``out`` is either the old or the new one.
      output_lock.OutputLockedError: another process is writing ``out`` (raised before any work).
    """
    started = time.perf_counter()
    out = pathlib.Path(out)
    if isinstance(replay_budget, bool) or not isinstance(replay_budget, int) or replay_budget < 0:
        raise UserError(f"replay budget must be a whole number of bytes >= 0; got {replay_budget!r}")
    budgeted = not math.isinf(config.memory_bytes) or config.compute_fraction is not None or config.compute_macs is not None
    budgeted_policy = policy_spec(config.policy).budgeted
    if budgeted and not budgeted_policy:
        LOG.warning("policy %s ignores the memory and compute budgets (the summary shows its cost against them)",
                    config.policy)
    outputs = (out, *(pathlib.Path(p) for p in extra_outputs))
    for path in outputs:  # first: a name too long for the file system is said as such
        check_output_file(path, what="output")
    inputs = (pathlib.Path(model_path), *(() if start_from is None else (pathlib.Path(start_from),)))
    _check_distinct(outputs, inputs=inputs)
    with output_lock(out):  # before any work: a second run into the same output stops here
        previous = None
        if start_from is not None:  # read and checked field by field before the model is opened
            _require_regular_file(start_from, "checkpoint")
            previous = load_checkpoint(start_from)
        # a run from the export opens what it calls up to the selection, then adapt reopens the model on what the
        # training, the evaluation and the checkpoint call (adapt(reopen=True)): the peak holds one phase's arenas
        # (no optimizer slot is read before adapt reopens it: the selection's model leaves them unset)
        model = load_model(model_path, runtime, SELECTION_SIGNATURES if start_from is None else None,
                           without_slots=start_from is None)
        outside = [n for n in config.sparse_update_layers or () if n not in model.candidates]
        if outside:
            raise UserError(f"sparse_update layers {', '.join(outside)} are not candidate layers of this model; "
                            f"candidates: {', '.join(model.candidates)}")
        paper = None
        if budgeted_policy and (default_memory_budget or default_compute_budget):
            allowed = None  # a run from a replay memory selects above its cut: the default budget admits one of those
            if previous is not None and previous.replay is not None and replay_budget > 0:
                index = {layer.name: layer.index for layer in layer_table(model.metadata)}
                allowed = layers_above(previous.replay.cut_index, model.candidates, index)
            config, paper = default_run_budget(model, config, default_memory_budget, default_compute_budget, allowed)
        reserve = checkpoint_bound_bytes(model, include_optimizer) + replay_budget + DOCUMENT_RESERVE_BYTES
        check_output_file(out, reserve_bytes=reserve, what="checkpoint")
        load_seconds = time.perf_counter() - started
        images, labels, names = _read_folder(support_dir, model, progress)
        start = None
        if previous is None:
            if len(names) < 2:
                raise ImageFolderError(f"support folder {printable(str(support_dir))} has {len(names)} class folder "
                                       f"({printable(names[0])}); adaptation needs at least 2 classes")
            check_labelled_set(model, images, labels)
        else:
            start, index = continue_from(previous, names, use_replay=replay_budget > 0,
                                         source=f"checkpoint {printable(os.fspath(start_from))}")
            labels, names = index[labels], start.class_names
            check_labelled_set(model, images, labels, min_classes=1, all_classes=False)
            start.check_fits(model, labels)
            if len(names) < 2:
                raise UserError(f"the checkpoint and the support folder name one class ({printable(names[0])}); "
                                "adaptation needs at least 2 classes")
            _check_layers_above(config, start, model)
            LOG.info("continuing from %s: %s", printable(os.fspath(start_from)), describe_start(start))
        rows = images.shape[0] + (0 if start is None or start.replay is None else start.replay.num_images)
        replayed = f" and {rows - images.shape[0]} replayed" if rows > images.shape[0] else ""
        if config.batch_size > rows:
            raise UserError(f"batch size {config.batch_size} exceeds the {images.shape[0]} support images{replayed}")
        steps = config.num_steps(rows)
        if max_steps is not None and steps > max_steps:
            raise UserError(f"{steps} optimizer steps ({config.epochs} epochs x {images.shape[0]} images{replayed} "
                            f"/ batch {config.batch_size}) exceed the limit of {max_steps}")
        query = None
        if query_dir is not None:
            q_images, q_labels, q_names = _read_folder(query_dir, model, progress)
            index = {name: i for i, name in enumerate(names)}
            unknown = sorted(set(q_names) - set(index))
            if unknown:
                raise ImageFolderError(f"query classes {', '.join(printable(n) for n in unknown)} are not support classes")
            query = (q_images, np.asarray([index[q_names[k]] for k in q_labels], np.int32))
            check_labelled_set(model, *query, name="query", min_classes=1, all_classes=False)
        read_seconds = time.perf_counter() - started - load_seconds
        config = dataclasses.replace(config, fisher_chunk_size=min(config.fisher_chunk_size, COMMAND_FISHER_ROWS))
        # the support accuracy before adaptation: the prototype head on the exported backbone (with start, the
        # checkpoint's backbone and the continued run's starting head), scored as adapt sets it up, so that
        # the untouched model's reset_state runs nothing (TrainableModel.reset_state)
        before: list[float] = []
        result = adapt(model, images, labels, config, progress=progress, start=start, reopen=True,
                       on_head=lambda head_model: before.append(support_accuracy(head_model, images, labels)))
        # the accuracies first (they read the state, never write it): the checkpoint's get_state arena, the
        # largest allocation left, then lands on the pages their temporaries freed (free_memory)
        after = support_accuracy(model, images, labels)
        query_accuracy, eval_seconds = None, None
        if query is not None:
            eval_start = time.perf_counter()
            query_accuracy = evaluate(model, *query)
            eval_seconds = time.perf_counter() - eval_start
        release_free_memory()
        replay_start = time.perf_counter()
        adapted = checkpoint_after(model, result.selection, start, images, labels, names, replay_budget=replay_budget,
                                   seed=config.seed, include_optimizer=include_optimizer, chunk_size=config.chunk_size,
                                   views=result.views)
        replay_seconds = time.perf_counter() - replay_start
        report = {"model": str(model_path), "support": str(support_dir), "classes": list(names),
                  "shots": np.bincount(labels, minlength=len(names)).tolist(),
                  "support_size": int(images.shape[0]), **result.to_dict(),
                  "support_accuracy_before": before[0], "support_accuracy_after": after,
                  "policy": config.policy, "batch_size": config.batch_size, "checkpoint": str(out), "runtime": model.runtime,
                  "input_shape": [int(v) for v in model.input_shape],
                  "layer_costs": layer_costs(model)}
        report["seconds"] = {"load": load_seconds, "read": read_seconds, **report["seconds"],
                             "remember": replay_seconds}
        report["replay_memory"] = replay_report(adapted.replay, replay_budget, names, model)
        if start is not None:
            report["continued_from"] = {
                "checkpoint": os.fspath(start_from), "classes": list(previous.class_names),
                "new_classes": list(names[len(previous.class_names):]),
                "replayed": 0 if start.replay is None else start.replay.num_images,
                "selection_from": None if start.replay is None else start.replay.cut_layer,
                "saved_selection": adapted.selection.to_dict()}
        if paper is not None and paper != config.budget:  # the default budget was raised to admit a layer
            report["raised_from"] = {"memory_bytes": None if math.isinf(paper.memory_bytes) else paper.memory_bytes,
                                     "compute_limit_macs": paper.compute_limit(layer_table(model.metadata))}
        if query is not None:
            report["query_accuracy"] = query_accuracy
            report["seconds"]["eval"] = eval_seconds
            report["query_size"] = int(query[0].shape[0])
        resolved = {"model": str(model_path), "support": str(support_dir),
                    "query": None if query_dir is None else str(query_dir), "out": str(out),
                    C.CK_INCLUDE_OPTIMIZER: include_optimizer, "adapt": config.to_dict(),
                    C.F_MODEL_ID: model.metadata[C.F_MODEL_ID], "runtime": model.runtime,
                    "from": None if start_from is None else os.fspath(start_from), "replay_budget": replay_budget}
        report["total_seconds"] = time.perf_counter() - started
        report["peak_rss_bytes"] = resident_memory().peak_bytes  # all but encoding and writing the small file
        # one file, one rename: the checkpoint, its config and its report are replaced together
        report["checkpoint_bytes"] = save_checkpoint(out, model, adapted.selection, include_optimizer=include_optimizer,
                                                     class_names=names, config=resolved, report=report,
                                                     arrays=adapted.arrays, replay=adapted.replay)
        return report


def _check_layers_above(config: AdaptConfig, start: AdaptStart, model: TrainableModel) -> None:
    """UserError when ``--sparse-update-layers`` names a layer below the replay memory's cut (which stays frozen)."""
    allowed = set(start.candidates(model))
    below = [n for n in config.sparse_update_layers or () if n not in allowed]
    if below:
        raise UserError(f"sparse_update layers {', '.join(below)} lie below the replay memory's cut "
                        f"{start.replay.cut_layer}, whose stored activations they feed: a run from this checkpoint "
                        f"updates only {', '.join(start.candidates(model))} (or give a replay budget of 0)")


def replay_report(memory: ReplayMemory | None, budget: int, names: Sequence[str],
                  model: TrainableModel) -> dict[str, Any]:
    """The report's ``replay_memory``: the stored memory's summary (``ReplayMemory.report``), or why none is kept."""
    if memory is not None:
        return memory.report(names)
    reason = ("replay budget 0" if budget <= 0 else "the model has no cached cut" if not model.cached_cuts
              else model.cache_unsafe or "the budget holds no activation at the cut")
    return {"budget": budget, "bytes": 0, "rows": 0, "examples": 0, "reason": reason}


def run_record(checkpoint_path: str | os.PathLike) -> dict[str, Any]:
    """The config and report a checkpoint holds: ``{"config": ..., "report": ...}`` (``tflite-train show``).

    The report gets ``checkpoint`` (this path) and ``checkpoint_bytes`` (the file's size) as ``adapt``
    printed them; losses stored as null (non-finite) read back as NaN.

    Raises:
      UserError: the file is not a regular file, or holds no report (e.g. written by the Java core).
      CheckpointError: the file is not a valid checkpoint, or its report lacks a field ``show`` prints or
        holds one of the wrong type (``report_schema``).
    """
    _require_regular_file(checkpoint_path, "checkpoint")
    checkpoint = load_checkpoint(checkpoint_path)
    if checkpoint.report is None:
        raise UserError(f"checkpoint {printable(os.fspath(checkpoint_path))} holds no run report "
                        "(not written by tflite-train adapt)")
    report = check_run_report(checkpoint.report, printable(os.fspath(checkpoint_path)))
    report["losses"] = [math.nan if v is None else v for v in report.get("losses", [])]
    report["checkpoint"] = os.fspath(checkpoint_path)
    report["checkpoint_bytes"] = os.stat(checkpoint_path).st_size
    return {"config": dict(checkpoint.config or {}), "report": report}


def run_prediction(
    model_path: str | os.PathLike, checkpoint_path: str | os.PathLike, image_paths: Sequence[str | os.PathLike],
    *, runtime: str | None = None, progress: Progress = no_progress,
) -> list[tuple[str, int, str, float]]:
    """(image path, class id, class name, confidence) per image for the adapted model.

    The confidence is the softmax over the head's K logits s cos(f(x), c_k) of the chosen class.
    """
    if not image_paths:
        raise UserError("no images given to predict")
    _require_regular_file(checkpoint_path, "checkpoint")
    model, checkpoint = open_adapted(model_path, checkpoint_path, runtime)
    with progress("reading", len(image_paths)) as bar:
        images = load_images(image_paths, model.input_shape, input_range(model.metadata), progress=bar.update)
    logits = class_logits(model, images, progress=progress).astype(np.float64)
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    ids = np.argmax(logits, axis=1)
    names = checkpoint.class_names or tuple(str(i) for i in range(model.num_classes))
    return [(str(p), int(i), names[int(i)], float(probabilities[n, i])) for n, (p, i) in enumerate(zip(image_paths, ids))]
