"""The file-level edge of adaptation (used by the CLI): image folders in, checkpoint + JSON out.

``run_adaptation`` validates everything (model, images, config) before it writes anything, then
writes the checkpoint atomically, then ``<out>.config.json`` (the resolved config and inputs) and
``<out>.report.json`` (selection, cost vs budget, per-phase seconds, losses, query accuracy).
A failure leaves any earlier files at those paths untouched.
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from tflite_train.runtime.checkpoint import load_checkpoint, restore_checkpoint, save_checkpoint, write_atomic
from tflite_train.runtime.images import load_image_folder, load_images
from tflite_train.runtime.interpreter import TrainableModel
from tflite_train.runtime.model_contract import check_metadata
from tflite_train.runtime.trainer import AdaptConfig, adapt, check_labelled_set, evaluate, predict


def sidecar_paths(out: str | os.PathLike) -> tuple[pathlib.Path, pathlib.Path]:
    """(``<out>.config.json``, ``<out>.report.json``)."""
    out = pathlib.Path(out)
    return out.with_name(out.name + ".config.json"), out.with_name(out.name + ".report.json")


def load_model(model_path: str | os.PathLike) -> TrainableModel:
    """Opens an exported model and checks its metadata (ValueError naming the file otherwise)."""
    path = pathlib.Path(model_path)
    if not path.is_file():
        raise ValueError(f"model file {path} does not exist")
    model = TrainableModel(path)
    check_metadata(model.metadata)
    return model


def to_input_range(images: np.ndarray, model: TrainableModel) -> np.ndarray:
    """Images decoded to [0, 1] mapped to the model's input range (metadata ``input.range``, e.g.
    raw pixels [0, 255] for a model that normalises its input itself): x = low + (high - low) u."""
    low, high = (float(v) for v in model.metadata["input"].get("range", (0.0, 1.0)))
    if (low, high) == (0.0, 1.0):
        return images
    return (low + (high - low) * images).astype(np.float32)


def run_adaptation(
    model_path: str | os.PathLike,
    support_dir: str | os.PathLike,
    out: str | os.PathLike,
    config: AdaptConfig,
    *,
    query_dir: str | os.PathLike | None = None,
    include_optimizer: bool = False,
) -> dict[str, Any]:
    """Adapts the model to ``support_dir`` and saves the checkpoint ``out``; returns the report dict."""
    out = pathlib.Path(out)
    if not out.parent.is_dir():
        raise ValueError(f"output directory {out.parent} does not exist")
    start = time.perf_counter()
    model = load_model(model_path)
    load_seconds = time.perf_counter() - start
    images, labels, names = load_image_folder(support_dir, model.input_shape)
    images = to_input_range(images, model)
    check_labelled_set(model, images, labels)
    query = None
    if query_dir is not None:
        q_images, q_labels, q_names = load_image_folder(query_dir, model.input_shape)
        q_images = to_input_range(q_images, model)
        index = {name: i for i, name in enumerate(names)}
        unknown = sorted(set(q_names) - set(index))
        if unknown:
            raise ValueError(f"query classes {unknown} are not support classes {list(names)}")
        query = (q_images, np.asarray([index[q_names[k]] for k in q_labels], np.int32))
        check_labelled_set(model, *query, name="query", min_classes=1, all_classes=False)
    result = adapt(model, images, labels, config)
    report = {"model": str(model_path), "support": str(support_dir), "classes": list(names),
              "support_size": int(images.shape[0]), **result.to_dict()}
    report["seconds"] = {"load": load_seconds, **report["seconds"]}
    if query is not None:
        start = time.perf_counter()
        report["query_accuracy"] = evaluate(model, *query)
        report["seconds"]["eval"] = time.perf_counter() - start
        report["query_size"] = int(query[0].shape[0])
    report["checkpoint_bytes"] = save_checkpoint(out, model, result.selection, include_optimizer=include_optimizer,
                                                 class_names=names)
    config_path, report_path = sidecar_paths(out)
    resolved = {"model": str(model_path), "support": str(support_dir),
                "query": None if query_dir is None else str(query_dir), "out": str(out),
                "include_optimizer": include_optimizer, "adapt": config.to_dict(),
                "model_id": model.metadata["model_id"], "runtime": model.runtime}
    write_atomic(config_path, (json.dumps(resolved, indent=2, sort_keys=True) + "\n").encode())
    write_atomic(report_path, (json.dumps(report, indent=2, sort_keys=True) + "\n").encode())
    return report


def run_prediction(
    model_path: str | os.PathLike, checkpoint_path: str | os.PathLike, image_paths: Sequence[str | os.PathLike]
) -> list[tuple[str, int, str]]:
    """(image path, class id, class name) per image for the adapted model."""
    if not image_paths:
        raise ValueError("no images given to predict")
    model = load_model(model_path)
    checkpoint = restore_checkpoint(model, load_checkpoint(checkpoint_path))
    images = to_input_range(load_images(image_paths, model.input_shape), model)
    ids = predict(model, images)
    names = checkpoint.class_names or tuple(str(i) for i in range(model.num_classes))
    return [(str(p), int(i), names[int(i)]) for p, i in zip(image_paths, ids)]
