"""Export settings that belong to a set of trained weights, read from their sidecar JSON.

``tflite-train train-weights`` writes ``<name>.weights.h5`` (Keras weights of the BatchNorm form)
beside ``<name>.json``, which records the backbone, the input spec and the meta-trained cosine
head. An export of those weights must use the same input normalisation and cosine scale as
training, or the exported model computes a different function: this module maps the sidecar to
``ExportConfig`` fields.
"""

from __future__ import annotations

import pathlib
from typing import Any

from tflite_train.contract import loads_strict
from tflite_train.default_weights import IMAGENET

WEIGHTS_SUFFIX = ".weights.h5"


def sidecar_path(weights: str | pathlib.Path) -> pathlib.Path:
    """``X.weights.h5`` -> ``X.json``.

    Raises:
      ValueError: if ``weights`` does not end in ``.weights.h5``.
    """
    path = pathlib.Path(weights)
    if not path.name.endswith(WEIGHTS_SUFFIX):
        raise ValueError(f"weights must be a Keras '{WEIGHTS_SUFFIX}' file; got {str(weights)!r}")
    return path.with_name(path.name[: -len(WEIGHTS_SUFFIX)] + ".json")


def export_fields_from_sidecar(weights: str | pathlib.Path) -> dict[str, Any]:
    """``ExportConfig`` fields implied by the weights' sidecar JSON ({} when there is none).

    Returns backbone, input_size (H, W), in_channels, cosine_scale and the in-graph
    normalisation. Training feeds images in the sidecar's ``input.range`` unnormalised, so the
    export uses mean 0 and std 1 (the identity) -- unless ``input.normalisation`` is "in-model"
    (EfficientNet-Lite0: raw [0, 255] pixels, the model's Rescaling layer becomes the input spec).

    Raises:
      ValueError: a sidecar that exists but is not strict JSON (``contract.loads_strict``: a duplicate key is
        refused) or lacks a required key; one line naming the file.
    """
    path = sidecar_path(weights)
    if not path.exists():
        return {}
    try:
        spec = loads_strict(path.read_text())
        height, width, channels = (int(v) for v in spec["input"]["shape"])
        low, high = (float(v) for v in spec["input"]["range"])
        in_model = spec["input"].get("normalisation") == "in-model"
        fields = {
            "backbone": str(spec["backbone"]),
            "input_size": (height, width),
            "in_channels": channels,
        }
        if not in_model:
            fields.update(mean=(0.0,) * channels, std=(1.0,) * channels)
        if "cosine_head" in spec:
            fields["cosine_scale"] = float(spec["cosine_head"]["scale"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"weights sidecar {str(path)!r} is not a valid weights spec: {err}") from err
    if in_model:  # the model's own Rescaling layer is read as the input spec (e.g. Lite0: [0, 255], (x - 127) / 128)
        if (low, high) != (0.0, 255.0):
            raise ValueError(f"weights sidecar {str(path)!r}: an in-model normalisation takes [0, 255]; got {[low, high]}")
    elif (low, high) != (0.0, 1.0):
        raise ValueError(f"weights sidecar {str(path)!r}: input range must be [0, 1]; got {[low, high]}")
    return fields


def resolve_export_config(weights: str | None = None, **explicit: Any):
    """An ``ExportConfig`` from the weights (their sidecar, if any) and explicitly given fields.

    ``weights`` is a ``.weights.h5`` path, ``"imagenet"`` (``tflite_train.default_weights.IMAGENET``:
    EfficientNet-Lite0's ImageNet weights, which the backbone builder loads from the package; the export's
    default, at ``DEFAULT_INPUT_SIZE`` with ``DEFAULT_CANDIDATE_BLOCKS["lite0"]`` unless given) or None (the
    backbone's seeded initialisation). Explicit fields (None = not given) override the sidecar, except the
    architecture fields (backbone, input_size, in_channels), which must agree with it: weights cannot be
    loaded into another architecture.

    Raises:
      ValueError: an explicit architecture field that contradicts the sidecar or the ImageNet weights' backbone
        (lite0, 3 channels), or a bad sidecar.
    """
    from tflite_train.converters.export_config import DEFAULT_CANDIDATE_BLOCKS, DEFAULT_INPUT_SIZE, ExportConfig

    given = {key: value for key, value in explicit.items() if value is not None}
    if weights == IMAGENET:
        for key, value in (("backbone", "lite0"), ("in_channels", 3)):
            if given.get(key, value) != value:
                raise ValueError(f"{key}={given[key]!r} contradicts the {IMAGENET!r} weights "
                                 f"(EfficientNet-Lite0's: {key}={value!r})")
        defaults = dict(input_size=(DEFAULT_INPUT_SIZE,) * 2, candidate_blocks=DEFAULT_CANDIDATE_BLOCKS["lite0"])
        return ExportConfig(**{**defaults, **given, "backbone": "lite0", "weights": None})
    fields = export_fields_from_sidecar(weights) if weights else {}
    for key in ("backbone", "input_size", "in_channels"):
        if key in given and key in fields:
            value = given[key]
            if key == "input_size":
                value = (value, value) if isinstance(value, int) else tuple(value)
            if value != fields[key]:
                raise ValueError(f"{key}={given[key]!r} contradicts the weights' sidecar ({fields[key]!r})")
    return ExportConfig(**{**fields, **given, "weights": weights})
