"""Classifying with an adapted model: predicted classes, the head's logits and query accuracy."""

from __future__ import annotations

from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.adaptation.progress import Progress, no_progress
from tflite_train.runtime.adaptation.trainer import check_labelled_set
from tflite_train.runtime.model.interpreter import TrainableModel


def predict(model: TrainableModel, images: np.ndarray, chunk_size: int = 64) -> np.ndarray:
    """Predicted class ids i32[N]: argmax over the first ``num_classes`` logits."""
    return np.argmax(class_logits(model, images, chunk_size), axis=1).astype(np.int32)


def class_logits(model: TrainableModel, images: np.ndarray, chunk_size: int = 64,
                 progress: Progress = no_progress) -> np.ndarray:
    """The head's logits f32[N, K] over the K = ``num_classes`` classes (``progress("predicting", N)``)."""
    if model.num_classes < 1:
        raise ValueError("the model has no head (num_classes is 0): adapt it or load a checkpoint first")
    parts = []
    with progress("predicting", images.shape[0]) as bar:
        for i in range(0, images.shape[0], chunk_size):
            parts.append(model.infer(images[i:i + chunk_size])[C.LOGITS][:, :model.num_classes])
            bar.update(parts[-1].shape[0])
    return np.concatenate(parts)


def evaluate(model: TrainableModel, query_images: Any, query_labels: Any, chunk_size: int = 64) -> float:
    """Query accuracy in [0, 1] of the adapted model (labels must lie in 0..num_classes-1)."""
    images, labels = check_labelled_set(model, query_images, query_labels, name="query", min_classes=1,
                                        all_classes=False)
    if labels.max() >= model.num_classes:
        raise ValueError(f"query labels reach {labels.max()}, the head has {model.num_classes} classes")
    return float(np.mean(predict(model, images, chunk_size) == labels))
