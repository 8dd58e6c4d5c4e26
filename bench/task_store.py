"""Per-task results on disk: an interrupted benchmark resumes where it stopped, and its report can be
rendered from whatever has finished.

A *cell* is one method (label + ``AdaptConfig``) on one exported model, one target and one pool
(validation or test). Its tasks' results go to one JSON-lines file

    <out>/tasks/<model key>/<target>/<pool>/<label>-<key>.jsonl

whose first line is the header ``{"cell": {...}, "key": key}`` and every further line one finished
task. ``key`` = the first 16 hex digits of sha256 of the canonical JSON (sorted keys) of ``cell``,
which holds everything that changes a result:

* the model: its metadata ``model_id`` (a hash of the graph, every weight, the input spec, the head,
  the candidates, the optimizer and the initial state) and its export config (the ``.config.json``
  beside the file: train variants, cache signatures, ...);
* the ``AdaptConfig`` (``to_dict``: policy, budgets, learning rate, epochs, batch, seed, cache, ...);
* the target and the pool;
* the source-task Fisher of SparseUpdate's static ranking (the fingerprints of its source tasks);
* the interpreter: module, version and threads.

A changed config therefore writes a new file and never reads an old one. Each task line is
``{"task": index in the pool's seeded episode list, "fingerprint": sha256 of the task's pixels and
labels (16 hex), "accuracy": %, "memory_bytes", "backward_macs", "seconds" (adaptation), "layers",
"cache": whether the steps ran from the cached cut, "predictions": the predicted class of each
query image, in query order (absent from lines written before it was stored)}``, written with one ``os.write`` on an
``O_APPEND`` descriptor, so a line is whole even when worker processes append to the same file at once.
A reader keeps, per index, the first line whose fingerprint is the task's (a changed data cache or
episode sampler never reuses a line) and skips a torn line (a write cut short by a crash).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import pathlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.tasks import Task

__all__ = ["NEUTRAL_ADAPT_FIELDS", "TASKS_DIR", "TaskRecord", "append_record", "cell_key", "model_identity",
           "open_cell", "read_records", "stored_adapt", "stored_cell", "stored_cells", "task_fingerprint"]

LOG = logging.getLogger(__name__)
TASKS_DIR = "tasks"
"""The store's folder inside the benchmark's ``out_dir``."""


@dataclasses.dataclass(frozen=True)
class TaskRecord:
    """One finished task of a cell.

    Attributes:
      task: Index of the task in its pool's seeded episode list.
      fingerprint: ``task_fingerprint`` of the task.
      accuracy: Query accuracy after the adaptation (%).
      memory_bytes, backward_macs: The selection's backward-pass memory and MACs per sample (cost
        model; 0 for no update).
      seconds: Wall time of the adaptation (``adapt``'s phases; evaluation excluded).
      layers: The selected layers.
      cache: True when the steps ran from the cached cut (``AdaptResult.cache.used``).
      predictions: The predicted class of each query image, in query order (None: not stored). Two
        records of one task with equal predictions are the same classifier on that query set, which
        equal accuracies are not: the no-op check reads these (``bench.paired_section.assemble_run``).
    """

    task: int
    fingerprint: str
    accuracy: float
    memory_bytes: float
    backward_macs: float
    seconds: float
    layers: tuple[str, ...]
    cache: bool
    predictions: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready line (without ``predictions`` when None)."""
        out = {**dataclasses.asdict(self), "layers": list(self.layers)}
        if self.predictions is None:
            del out["predictions"]
        else:
            out["predictions"] = list(self.predictions)
        return out

    def unchanged_from(self, reference: TaskRecord) -> bool:
        """Whether this task's adaptation left the query outcome of ``reference`` (the untrained row on
        the same task) as it was: equal predictions when both records hold them, else equal accuracy.

        Equal accuracy alone is a weak sign on a small query set (one right-to-wrong and one
        wrong-to-right change cancel; 7 queries give only 8 accuracy values), so it is the fallback
        for lines stored before predictions were.
        """
        if self.predictions is not None and reference.predictions is not None:
            return self.predictions == reference.predictions
        return self.accuracy == reference.accuracy

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskRecord:
        """The record of a stored line.

        Raises:
          KeyError, TypeError, ValueError: not a task line.
        """
        predictions = data.get("predictions")
        return cls(int(data["task"]), str(data["fingerprint"]), float(data["accuracy"]), float(data["memory_bytes"]),
                   float(data["backward_macs"]), float(data["seconds"]), tuple(str(n) for n in data["layers"]),
                   bool(data["cache"]), None if predictions is None else tuple(int(c) for c in predictions))


def task_fingerprint(task: Task) -> str:
    """sha256 (first 16 hex) of the task's support and query pixels, labels and shapes."""
    digest = hashlib.sha256()
    for array in (task.support, task.support_labels, task.query, task.query_labels):
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


def model_identity(path: str | os.PathLike) -> dict[str, Any]:
    """``{"model_id": metadata model_id (or the file's sha256 without one), "export": its export config}``."""
    from tflite_train import contract as C
    from tflite_train.runtime import read_metadata

    path = pathlib.Path(path)
    model_id = read_metadata(str(path)).get(C.F_MODEL_ID) or hashlib.sha256(path.read_bytes()).hexdigest()
    sidecar = path.with_suffix(path.suffix + ".config.json")
    export = json.loads(sidecar.read_text()) if sidecar.is_file() else None
    return {C.F_MODEL_ID: model_id, "export": export}


NEUTRAL_ADAPT_FIELDS = {"prototype_mode": "fixed", "batch_mode": "batch", "rate_choice": None, "choice_updates": None,
                        "choice_score": "accuracy"}
"""``AdaptConfig`` fields added after most cells were stored (the fine-tuning options of issue 39), at the values
that compute what the config computed before they existed."""


def stored_adapt(adapt: Mapping[str, Any]) -> dict[str, Any]:
    """``adapt`` (an ``AdaptConfig.to_dict``) as cells store it: without the ``NEUTRAL_ADAPT_FIELDS`` that hold
    their neutral value, so a cell stored before those fields existed keeps its key, and another value (another
    procedure) still makes another cell; and without ``learning_rate`` where nothing reads it (policy ``none``
    updates nothing; a per-task ``rate_choice`` sets the rate itself), so that a change of ``AdaptConfig``'s
    default rate keeps those cells."""
    unused = {"learning_rate"} if adapt.get("policy") == "none" or adapt.get("rate_choice") else set()
    return {k: v for k, v in adapt.items()
            if k not in unused and not (k in NEUTRAL_ADAPT_FIELDS and v == NEUTRAL_ADAPT_FIELDS[k])}


def stored_cell(cell: Mapping[str, Any]) -> dict[str, Any]:
    """``cell`` as the store writes and hashes it (its ``adapt`` through ``stored_adapt``)."""
    adapt = cell.get("adapt")
    return {**cell, "adapt": stored_adapt(adapt)} if isinstance(adapt, Mapping) else dict(cell)


def cell_key(cell: Mapping[str, Any]) -> str:
    """sha256 (first 16 hex) of the canonical JSON of ``cell``."""
    return hashlib.sha256(json.dumps(cell, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "_"


def _model_dir(out_dir: str | os.PathLike, model: str) -> pathlib.Path:
    """The store's folder of model key ``model`` (``"lite0_128/sparse"`` -> ``tasks/lite0_128/sparse``)."""
    return pathlib.Path(out_dir, TASKS_DIR, *(_slug(p) for p in model.split("/")))


def open_cell(out_dir: str | os.PathLike, model: str, label: str, target: str, pool: str,
              cell: Mapping[str, Any]) -> pathlib.Path:
    """The file of a cell (module docstring), created with its header line when new.

    Args:
      out_dir: The benchmark's output folder.
      model: The method's model key (e.g. ``"lite0_128/sparse"``), a folder of the store.
      label: The method's label (part of the file name).
      target, pool: The tasks' target and pool.
      cell: Everything that changes a result (hashed into the file name, as ``stored_cell`` writes it).
    """
    cell = stored_cell(cell)
    key = cell_key(cell)
    path = pathlib.Path(_model_dir(out_dir, model), _slug(target), _slug(pool),
                        f"{_slug(label)}-{key}.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return path
    try:
        os.write(fd, (json.dumps({"cell": cell, "key": key}, sort_keys=True, default=str) + "\n").encode())
    finally:
        os.close(fd)
    return path


def append_record(path: str | os.PathLike, record: TaskRecord) -> None:
    """Appends ``record`` (a ``TaskRecord``, or another section's record with ``task``, ``fingerprint`` and
    ``to_dict``) as one line, in one ``os.write`` on an ``O_APPEND`` descriptor."""
    line = (json.dumps(record.to_dict(), sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, line)
    finally:
        os.close(fd)
    if written != len(line):
        raise OSError(f"{path}: wrote {written} of {len(line)} bytes of a task line")


def read_records(path: str | os.PathLike, fingerprints: Sequence[str] | None,
                 parse: Callable[[Mapping[str, Any]], Any] = TaskRecord.from_dict) -> dict[int, TaskRecord]:
    """Task index -> record of the cell file ``path`` (no file: empty).

    Args:
      path: A cell file.
      fingerprints: The fingerprint of each task of the pool (index order); a line is kept only when
        its index is below ``len(fingerprints)`` and its fingerprint matches. None = keep every line
        (counting progress without the tasks).
      parse: A line's record (``TaskRecord.from_dict``, or another section's; it raises KeyError, TypeError or
        ValueError on a line that is not one).
    """
    out: dict[int, TaskRecord] = {}
    try:
        text = pathlib.Path(path).read_text()
    except FileNotFoundError:
        return out
    stale = 0
    for line in text.splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn line
        if not isinstance(data, dict) or "task" not in data:
            continue  # the header
        try:
            record = parse(data)
        except (KeyError, TypeError, ValueError):
            continue
        if fingerprints is not None:
            if not 0 <= record.task < len(fingerprints):
                continue  # beyond this run's N tasks
            if fingerprints[record.task] != record.fingerprint:
                stale += 1
                continue
        out.setdefault(record.task, record)
    if stale:
        LOG.warning("%s: %d stored task(s) are not this config's tasks (changed data or sampler); they are rerun",
                    path, stale)
    return out


def stored_cells(out_dir: str | os.PathLike, model: str, pool: str, model_ids: Sequence[str]) -> list[pathlib.Path]:
    """The cell files of ``pool`` stored under the model key prefix ``model`` (e.g. a backbone run's key,
    ``"lite0_128"``) whose header names one of ``model_ids``: every setting any tuning round of a run
    on those models stored, including rounds of a resumed or extended run. Unreadable headers are skipped."""
    from tflite_train import contract as C

    root = _model_dir(out_dir, model)
    ids = set(model_ids)
    out = []
    for path in sorted(root.glob(f"**/{_slug(pool)}/*.jsonl")):
        try:
            with open(path) as f:
                header = json.loads(f.readline())
            model_id = header["cell"]["model"][C.F_MODEL_ID]
        except (OSError, json.JSONDecodeError, KeyError, TypeError):
            continue
        if model_id in ids:
            out.append(path)
    return out
