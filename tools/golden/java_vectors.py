"""Golden vectors that pin the Java core (``android_demo/core``) to the Python cost model.

TensorFlow-free: it imports only the pure-Python layer tables and cost model, so the staleness
test runs in the Pi environment too. One JSON file per (backbone, input size) holds the layer
table, every layer's :class:`~tflite_train.sparse.cost_model.LayerCost`, weight-gradient MACs for
several channel counts, ``channel_count`` for several ratios, ``total_forward_macs``,
``total_weights``, ``unfused_activation_bytes`` for several batch sizes and
:func:`~tflite_train.sparse.cost_model.backward_cost` for FullTrain, LastLayer, last-blocks and
sparse selections under every optimizer, several batch sizes and with/without a gradient buffer.
``selection_<backbone>_128.json`` (see :mod:`tools.golden.selection_vectors`) pins the Java
selection port; ``procedure.json`` (:mod:`tools.golden.procedure_vectors`) the pure parts of the Java
fine-tuning procedure (rate choice, update plan); ``checkpoint_replay.json``
(:mod:`tools.golden.checkpoint_vectors`) the Java checkpoint reader and writer on a checkpoint with a replay
memory. ``contract.json`` pins the Java ``Contract.layerState`` to
``tflite_train.contract``. ``metadata_tiny_32.json`` is an example of the exported-model metadata JSON (CONTRACT.md v1) for
the Java metadata-parser tests.

The files are generated, never hand-edited: ``tflite-train golden --out DIR`` rewrites them and
``tests/sparse/test_java_vectors.py`` fails when the committed copies are stale.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import random
from collections.abc import Mapping, Sequence
from typing import Any

from tflite_train import contract as C
from tflite_train.architectures import BACKBONES, build_layer_table, get_config
from tflite_train.sparse.cost_model import (
    OPTIMIZER_SLOTS,
    BackwardCost,
    backward_cost,
    channel_count,
    layer_cost,
    total_forward_macs,
    total_weights,
    unfused_activation_bytes,
    weight_grad_macs,
)
from tools.golden.checkpoint_vectors import render_checkpoint_vectors
from tools.golden.procedure_vectors import render_procedure_vectors
from tools.golden.selection_vectors import render_selection_vectors
from tflite_train.sparse.layer_table import LayerTable

DEFAULT_OUT = pathlib.Path("android_demo/core/src/test/resources/golden")
FORMAT_VERSION = C.FORMAT_VERSION
"""Version of the exported-model metadata format (CONTRACT.md; re-exported from tflite_train.contract)."""
VECTORS_VERSION = 1
"""Version of the golden-vector file layout read by the Java tests."""

CASES: tuple[tuple[str, int | tuple[int, int]], ...] = (
    ("tiny", 128), ("tiny", 13), ("tiny", (24, 40)),
    ("mcunet", 128), ("mcunet", 49),
    ("mbv2", 128), ("mbv2", 49),
    ("proxyless", 128), ("proxyless", 49),
)
"""(backbone, input size) pairs: 128 and one odd small size per backbone, plus a non-square one."""
RATIOS = (0.01, 0.1, 0.125, 0.25, 1 / 3, 0.5, 2 / 3, 0.75, 0.9, 1.0)
BATCH_SIZES = (1, 3, 8, 16)
COST_SETTINGS: tuple[tuple[str, int, bool], ...] = (
    ("adam", 1, True), ("adam", 8, False), ("sgd_momentum", 3, True), ("sgd", 16, False), ("sgd", 1, True),
)
"""(optimizer, batch_size, gradient_buffer) triples applied to every selection."""


def _size_label(input_size: int | tuple[int, int]) -> str:
    return f"{input_size}" if isinstance(input_size, int) else f"{input_size[0]}x{input_size[1]}"


def _backward_dict(cost: BackwardCost) -> dict[str, Any]:
    out = dataclasses.asdict(cost)
    out["total_bytes"] = cost.total_bytes
    out["backward_macs"] = cost.backward_macs
    return out


def _selections(table: LayerTable, seed: int) -> list[tuple[str, dict[str, int]]]:
    """Named selections {layer name: K}: none, FullTrain, LastLayer, last two blocks, sparse ones.

    The sparse ones are drawn with a seeded ``random.Random`` and written out explicitly, so the
    Java side never needs to reproduce the draw.
    """
    last = table.layers[-1]
    selections = [
        ("None", {}),
        ("FullTrain", {layer.name: layer.out_channels for layer in table}),
        ("LastLayer", {last.name: last.out_channels}),
        ("LastTwoBlocks", {table.layers[i].name: table.layers[i].out_channels for i in table.last_blocks(2)}),
        ("Stem", {"stem": table.layers[0].out_channels}),
    ]
    rng = random.Random(seed)
    for n in range(4):
        count = rng.randint(1, min(6, len(table)))
        chosen = sorted(rng.sample(range(len(table)), count))
        selections.append((
            f"Sparse{n}",
            {table.layers[i].name: channel_count(table.layers[i].out_channels, rng.choice(RATIOS)) for i in chosen},
        ))
    return selections


def cost_vectors(backbone: str, input_size: int | tuple[int, int], in_channels: int = 3) -> dict[str, Any]:
    """All cost-model figures of one backbone at one input size, as a JSON-ready dict.

    Args:
      backbone: A name from ``BACKBONES``.
      input_size: Input size (int or (H, W)).
      in_channels: Image channels.
    """
    if backbone not in BACKBONES:
        raise ValueError(f"backbone must be one of {sorted(BACKBONES)}; got {backbone!r}")
    table = build_layer_table(backbone, input_size, in_channels)
    seed = int.from_bytes(hashlib.sha256(f"{backbone}/{_size_label(input_size)}".encode()).digest()[:4], "little")
    channel_counts = sorted({layer.out_channels for layer in table})
    cases = []
    for label, selection in _selections(table, seed):
        for optimizer, batch_size, gradient_buffer in COST_SETTINGS:
            cost = backward_cost(table, selection, optimizer=optimizer, batch_size=batch_size,
                                 gradient_buffer=gradient_buffer)
            cases.append({
                "label": label, "channels": selection, "optimizer": optimizer, "batch_size": batch_size,
                "gradient_buffer": gradient_buffer, "expected": _backward_dict(cost),
            })
    return {
        "vectors_version": VECTORS_VERSION,
        "generator": "tflite-train golden",
        "backbone": backbone,
        "input_size": [input_size, input_size] if isinstance(input_size, int) else list(input_size),
        "in_channels": in_channels,
        C.F_FEATURE_DIM: get_config(backbone).feature_dim,
        "layers": table.to_list(),
        "layer_costs": [{**dataclasses.asdict(c), "params": c.params} for c in map(layer_cost, table)],
        "weight_grad_macs": [
            {"layer": layer.name, "channels": k, "macs": weight_grad_macs(layer, k)}
            for layer in table for k in sorted({1, max(1, layer.out_channels // 2), layer.out_channels})
        ],
        "channel_count": [
            {"out_channels": c, "ratio": r, "count": channel_count(c, r)} for c in channel_counts for r in RATIOS
        ],
        "total_forward_macs": total_forward_macs(table),
        "total_weights": total_weights(table),
        "unfused_activation_bytes": [
            {"batch_size": b, "bytes": unfused_activation_bytes(table, b)} for b in BATCH_SIZES
        ],
        "optimizer_slots": dict(OPTIMIZER_SLOTS),
        "backward_cost": cases,
    }


def metadata_example(backbone: str = "tiny", input_size: int = 32, candidate_blocks: int = 2) -> dict[str, Any]:
    """An exported-model metadata dict following CONTRACT.md v1 (for parser tests, not a real model).

    ``model_id`` here is the sha256 of the canonical layer-table JSON only (no weights exist).
    """
    table = build_layer_table(backbone, input_size)
    config = get_config(backbone)
    candidates = set(table.last_blocks(candidate_blocks))
    layers = []
    for layer, cost in zip(table, map(layer_cost, table)):
        layers.append({**layer.to_dict(), C.F_PARAMS: cost.params, C.F_FORWARD_MACS: cost.forward_macs,
                       C.F_CANDIDATE: layer.index in candidates})
    model_id = hashlib.sha256(json.dumps(table.to_list(), sort_keys=True).encode()).hexdigest()
    names = [table.layers[i].name for i in sorted(candidates)]
    state = C.state_names(names, "adam")
    return {
        C.F_FORMAT: C.FORMAT,
        C.F_FORMAT_VERSION: C.FORMAT_VERSION,
        C.F_BACKBONE: backbone,
        C.F_MODEL_ID: model_id,
        C.F_INPUT: {C.F_HEIGHT: input_size, C.F_WIDTH: input_size, C.F_CHANNELS: 3, C.F_DTYPE: "float32",
                    C.F_RANGE: [0.0, 1.0], C.F_MEAN: [0.485, 0.456, 0.406], C.F_STD: [0.229, 0.224, 0.225]},
        C.F_FEATURE_DIM: config.feature_dim,
        C.F_CLASS_CAPACITY: 10,
        C.F_HEAD: {C.F_TYPE: C.HEAD_TYPE, C.F_SCALE: 10.0},
        C.F_OPTIMIZER: {C.F_NAME: "adam", C.LEARNING_RATE: 0.001, C.F_BETA1: 0.9, C.F_BETA2: 0.999,
                        C.F_EPSILON: 1e-07, C.F_MOMENTUM: 0.0},
        C.F_LAYERS: layers,
        C.F_CANDIDATES: names,
        C.F_STATE: state,
        C.F_SIGNATURES: C.signature_io(names, state),
    }


def contract_names() -> dict[str, Any]:
    """The state names per optimizer (``tflite_train.contract.layer_state``) that ``ContractTest`` checks the
    hand-written ``Contract.layerState`` against; every constant of ``Contract.java`` is generated."""
    return {"layer_state": {opt: C.layer_state("x", opt) for opt in C.OPTIMIZER_SLOTS}}


def _dump(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def render_vectors(cases: Sequence[tuple[str, int | tuple[int, int]]] = CASES) -> dict[str, str]:
    """File name -> file text of every golden file (pure; no I/O)."""
    files = {f"costs_{b}_{_size_label(size)}.json": _dump(cost_vectors(b, size)) for b, size in cases}
    files["metadata_tiny_32.json"] = _dump(metadata_example())
    files["contract.json"] = _dump(contract_names())
    selection_files = render_selection_vectors()
    files.update(selection_files)
    files.update(render_procedure_vectors())
    files.update(render_checkpoint_vectors(metadata_example()))
    files["index.json"] = _dump({"vectors_version": VECTORS_VERSION,
                                 "cost_files": sorted(f for f in files if f.startswith("costs_")),
                                 "selection_files": sorted(selection_files)})
    return files


def write_vectors(out_dir: str | pathlib.Path = DEFAULT_OUT) -> list[pathlib.Path]:
    """Writes every golden file into ``out_dir`` (created if needed) and returns the paths."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in render_vectors().items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
