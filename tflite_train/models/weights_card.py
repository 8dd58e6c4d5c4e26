"""The export settings that belong to a trained weights file (its JSON "card" beside it).

``tflite-train train-weights`` writes ``<backbone>_<size>_meta.weights.h5`` and ``<...>_meta.json``
(``tflite_train.meta.shipped_weights``). The weights were trained on images in [0, 1] fed to the
backbone unnormalised (uint8 / 255), with a cosine head logits = s (cos + b). An export of them must
use the same input size, mean 0 / std 1 and the same scale s (b ~ 0 is dropped: it shifts every
logit equally and so changes neither the softmax nor the argmax).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib


@dataclasses.dataclass(frozen=True)
class WeightsCard:
    """Export settings read from a weights file's card.

    Attributes:
      backbone: Backbone name the weights belong to.
      input_size: (H, W) the weights were trained at.
      in_channels: Image channels.
      mean, std: Per-channel input normalisation x' = (x - mean) / std applied before the backbone.
      cosine_scale: s of the cosine head.
    """

    backbone: str
    input_size: tuple[int, int]
    in_channels: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    cosine_scale: float


def card_path(weights: str | pathlib.Path) -> pathlib.Path:
    """``X.weights.h5`` -> ``X.json`` (``X.h5`` -> ``X.json``)."""
    weights = pathlib.Path(weights)
    name = weights.name.removesuffix(".h5").removesuffix(".weights")
    return weights.with_name(name + ".json")


def read_weights_card(weights: str | pathlib.Path) -> WeightsCard | None:
    """The card beside ``weights``, or None when there is none.

    Raises:
      ValueError: the card exists but lacks ``backbone``, ``input.shape`` or has a non-[0, 1] range.
    """
    path = card_path(weights)
    if not path.exists():
        return None
    card = json.loads(path.read_text())
    try:
        h, w, c = (int(v) for v in card["input"]["shape"])
        low, high = (float(v) for v in card["input"].get("range", [0.0, 1.0]))
        backbone = str(card["backbone"])
        scale = float(card.get("cosine_head", {}).get("scale", 10.0))
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"weights card {path} is malformed: {err!r}") from err
    if (low, high) != (0.0, 1.0):
        raise ValueError(f"weights card {path}: input range must be [0, 1]; got {[low, high]}")
    return WeightsCard(backbone=backbone, input_size=(h, w), in_channels=c, mean=(0.0,) * c, std=(1.0,) * c,
                       cosine_scale=scale)
