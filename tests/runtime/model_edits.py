"""Edits of an exported model's metadata JSON that make it lie about the graph (validation tests)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable

from tflite_train import contract as C


def _capacity(meta: dict) -> tuple[dict, str]:
    meta[C.F_CLASS_CAPACITY] += 1
    return meta, re.escape(f"metadata {C.F_CLASS_CAPACITY} = {meta[C.F_CLASS_CAPACITY]} but the graph has "
                           f"{meta[C.F_CLASS_CAPACITY] - 1}")


def _input_size(meta: dict) -> tuple[dict, str]:
    meta[C.F_INPUT][C.F_HEIGHT] += 2
    return meta, re.escape(f"metadata {C.F_INPUT}.{C.F_HEIGHT} = {meta[C.F_INPUT][C.F_HEIGHT]} but the graph has "
                           f"{meta[C.F_INPUT][C.F_HEIGHT] - 2}")


def _extra_candidate(meta: dict) -> tuple[dict, str]:
    layers = meta[C.F_LAYERS]
    first = next(i for i, layer in enumerate(layers) if layer[C.F_NAME] == meta[C.F_CANDIDATES][0])
    extra = layers[first - 1]
    extra[C.F_CANDIDATE] = True
    meta[C.F_CANDIDATES].insert(0, extra[C.F_NAME])
    return meta, re.escape(f"metadata {C.F_CANDIDATES}[{extra[C.F_NAME]!r}] = 'state variable {extra[C.F_NAME]}_kernel'")


def _dropped_signature(meta: dict) -> tuple[dict, str]:
    del meta[C.F_SIGNATURES][C.RESET_STATE]
    return meta, re.escape(f"metadata field {C.F_SIGNATURES!r} lacks the contract signature {C.RESET_STATE!r}")


def _newer_version(meta: dict) -> tuple[dict, str]:
    meta[C.F_FORMAT_VERSION] = C.FORMAT_VERSION + 1
    return meta, "newer than the 1 this runtime reads: update the runtime"


def _cached_cut_shape(meta: dict) -> tuple[dict, str]:
    cut = meta[C.F_CACHED_CUTS][-1]
    real = list(cut[C.F_SHAPE])
    cut[C.F_SHAPE] = [real[0] + 1, *real[1:]]
    return meta, re.escape(f"metadata {C.F_CACHED_CUTS}[{cut[C.F_LOWEST_LAYER]!r}].{C.F_SHAPE} = {cut[C.F_SHAPE]} "
                           f"but the graph has {real}")


def _episode_signature_dropped(meta: dict) -> tuple[dict, str]:
    name = meta[C.F_CACHED_CUTS][0][C.F_EPISODE_SIGNATURE]
    del meta[C.F_SIGNATURES][name]
    return meta, re.escape(f"metadata {C.F_SIGNATURES}.{name} = 'present' but the graph has 'no such signature'")


def _apply_accumulated_dropped(meta: dict) -> tuple[dict, str]:
    del meta[C.F_APPLY_ACCUMULATED_SIGNATURE]
    return meta, re.escape(f"has an {C.F_ACCUMULATE_SIGNATURE} but the metadata lacks "
                           f"{C.F_APPLY_ACCUMULATED_SIGNATURE!r}")


EDITS: dict[str, Callable[[dict], tuple[dict, str]]] = {
    "episode_signature_dropped": _episode_signature_dropped,
    "apply_accumulated_dropped": _apply_accumulated_dropped,
    "cached_cut_shape": _cached_cut_shape,
    "class_capacity": _capacity,
    "input_size": _input_size,
    "extra_candidate": _extra_candidate,
    "dropped_signature": _dropped_signature,
    "newer_version": _newer_version,
}
"""Edit name -> function(metadata) -> (edited metadata, regex the refusal must match)."""


def edited(meta: dict, edit: str) -> tuple[dict, str]:
    return EDITS[edit](copy.deepcopy(meta))


def rewrite_in_place(model: bytes, meta: dict, new: dict) -> bytes:
    """``model`` with its metadata JSON replaced by ``new`` in place (TF-free): the new JSON is padded
    with spaces to the old length; the informative ``config`` field is dropped to make room."""
    old = json.dumps(meta).encode()
    if model.count(old) != 1:
        raise ValueError("metadata JSON not found exactly once in the model bytes")
    new = {k: v for k, v in new.items() if k != C.F_CONFIG}
    data = json.dumps(new).encode()
    if len(data) > len(old):
        raise ValueError(f"edited metadata is {len(data) - len(old)} bytes longer than the original")
    return model.replace(old, data.ljust(len(old)))
