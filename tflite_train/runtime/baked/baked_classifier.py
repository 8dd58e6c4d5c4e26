"""A baked classifier (the file ``tflite-train bake`` writes) checked on load and run on a TFLite interpreter.

The file is a plain inference model (CONTRACT.md "Baked classifier"): any TFLite runtime runs it with the
standard signature runner (``interpreter.get_signature_runner("classify")(images=x)["logits"]``), as
``BakedClassifier`` does after checking, before any interpreter sees the bytes:

1. the integrity seal and the flatbuffer's structure (``integrity.check_model_bytes``, as for an export);
2. the metadata entry: UTF-8 strict JSON, the version rule with the baked format
   (``contract.check_format``), then every field against ``BAKED_METADATA`` (types, ranges, lengths; the
   ``input`` object as an export's, ``checkpoint_sha256`` 64 lower-case hex digits);
3. the graph against the metadata (``check_baked_graph``): exactly one signature, ``classify``, from
   ``images`` float32 [N, H, W, C] of the metadata's input to ``logits`` float32 [N, k] with k the number of
   ``class_names``, one subgraph, and no operator that holds state (variables, ``CALL_ONCE``, control flow).

A defect is one line naming the file and the field (``BakedModelError``).
"""

from __future__ import annotations

import os
import pathlib
import re
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.errors import UserError
from tflite_train.runtime.model.flatbuffer_graph import read_graph
from tflite_train.runtime.model.header_schema import Const, Field, Int, ListOf, Object, SchemaError, Str, require
from tflite_train.runtime.model.integrity import check_model_bytes
from tflite_train.runtime.model.interpreter import load_interpreter_class
from tflite_train.runtime.model.metadata import read_metadata_buffers, read_signature_defs
from tflite_train.runtime.model.model_contract import input_range
from tflite_train.runtime.model.model_metadata_schema import HEAD, INPUT

__all__ = ["BAKED_METADATA", "STATEFUL_OPS", "BakedClassifier", "BakedModelError", "check_baked_graph",
           "check_baked_metadata", "read_baked_metadata"]

MAX_CLASSES = 2**20
"""Most classes a baked classifier may name (an export's largest ``class_capacity``)."""
MAX_NAME = 1024
STATEFUL_OPS = frozenset({"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE", "IF", "WHILE", "CALL"})
"""Operators a baked classifier must not run: state and the control flow that reaches other subgraphs."""
_SHA256 = re.compile(r"[0-9a-f]{64}")


class BakedModelError(UserError):
    """A file that is not an intact baked classifier; the message names the file and what is wrong."""


def _metadata_rules(meta: dict, path: str) -> None:
    require(_SHA256.fullmatch(meta[C.F_CHECKPOINT_SHA256]) is not None, C.F_CHECKPOINT_SHA256,
            "must be 64 lower-case hex digits")


BAKED_METADATA = Object({
    C.F_FORMAT: Field(Const(C.BAKED_FORMAT)),
    C.F_FORMAT_VERSION: Field(Int(0, 2**31 - 1)),
    C.CK_CLASS_NAMES: Field(ListOf(Str(max_length=MAX_NAME), MAX_CLASSES, min_length=1)),
    C.F_INPUT: Field(INPUT),
    C.F_HEAD: Field(HEAD),
    C.F_MODEL_ID: Field(Str(max_length=MAX_NAME, min_length=1)),
    C.F_CHECKPOINT_SHA256: Field(Str(max_length=64, min_length=64)),
}, extra=True, validator=_metadata_rules)
"""The baked metadata's fields as readers check them (``contract.BAKED_FIELDS``); unknown fields are ignored."""


def check_baked_metadata(raw: bytes, source: str = "classifier") -> dict[str, Any]:
    """The baked metadata entry's bytes parsed and checked (module docstring, step 2).

    Raises:
      BakedModelError: not UTF-8 strict JSON, another format or version, or a field that does not fit.
    """
    try:
        metadata = C.loads_strict(bytes(raw).decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise BakedModelError(f"{source}: {C.BAKED_METADATA_NAME} metadata is not UTF-8 JSON "
                              f"({type(err).__name__}: {str(err)[:200]})") from None
    try:
        C.check_format(metadata, C.BAKED_FORMAT, C.BAKED_FORMAT_VERSION, "bake the classifier again")
        BAKED_METADATA.check(metadata, "")
    except (C.ContractError, SchemaError) as err:
        raise BakedModelError(f"{source}: {C.BAKED_METADATA_NAME} metadata {err}") from None
    return metadata


def check_baked_graph(data: bytes, metadata: dict[str, Any], source: str = "classifier") -> None:
    """The graph against the checked metadata (module docstring, step 3); BakedModelError otherwise."""
    signatures = read_signature_defs(data)
    if set(signatures) != {C.CLASSIFY}:
        raise BakedModelError(f"{source}: a baked classifier has the one signature {C.CLASSIFY!r}; "
                              f"this file has {sorted(signatures)}")
    inp = metadata[C.F_INPUT]
    want = {C.F_INPUTS: {C.IMAGES: ((-1, inp[C.F_HEIGHT], inp[C.F_WIDTH], inp[C.F_CHANNELS]), inp[C.F_DTYPE])},
            C.F_OUTPUTS: {C.LOGITS: ((-1, len(metadata[C.CK_CLASS_NAMES])), "float32")}}
    for kind, tensors in want.items():
        got = signatures[C.CLASSIFY][kind]
        if got != tensors:
            raise BakedModelError(f"{source}: signature {C.CLASSIFY!r} {kind} are {got}; the metadata "
                                  f"({C.F_INPUT}, {C.CK_CLASS_NAMES}) says {tensors}")
    graph = read_graph(data)
    stateful = sorted({op.name for ops in graph.operators for op in ops} & STATEFUL_OPS)
    if len(graph.operators) != 1 or stateful:
        raise BakedModelError(f"{source}: a baked classifier is one subgraph without state; this file has "
                              f"{len(graph.operators)} subgraphs and the operators {stateful}")


def read_baked_metadata(data: bytes, source: str = "classifier") -> dict[str, Any]:
    """A baked classifier's checked metadata, from the file's bytes (every step of the module docstring).

    Raises:
      BakedModelError: naming ``source`` and the defect (an export instead of a baked file: says so).
    """
    try:
        check_model_bytes(data, source)
    except ValueError as err:
        raise BakedModelError(str(err)) from None
    entries = read_metadata_buffers(data)
    if C.BAKED_METADATA_NAME not in entries:
        hint = " (an exported model: bake it with a checkpoint first)" if C.METADATA_NAME in entries else ""
        raise BakedModelError(f"{source}: no {C.BAKED_METADATA_NAME} metadata entry; not a baked classifier{hint}")
    metadata = check_baked_metadata(entries[C.BAKED_METADATA_NAME], source)
    check_baked_graph(data, metadata, source)
    return metadata


class BakedClassifier:
    """A baked classifier on a TFLite interpreter, checked on load (module docstring).

    Args:
      model: Path or bytes of the file.
      runtime: Preferred interpreter module (``interpreter.load_interpreter_class``), or None: the first
        installed.
      num_threads: Interpreter threads.
    """

    def __init__(self, model: str | os.PathLike | bytes, runtime: str | None = None, num_threads: int = 1) -> None:
        source = "model bytes" if isinstance(model, (bytes, bytearray)) else str(model)
        data = bytes(model) if isinstance(model, (bytes, bytearray)) else pathlib.Path(model).read_bytes()
        self.metadata = read_baked_metadata(data, source)
        interpreter_cls, self.runtime = load_interpreter_class(runtime)
        self.interpreter = interpreter_cls(model_content=data, num_threads=num_threads)
        self._runner = self.interpreter.get_signature_runner(C.CLASSIFY)
        inp = self.metadata[C.F_INPUT]
        self.input_shape: tuple[int, int, int] = (inp[C.F_HEIGHT], inp[C.F_WIDTH], inp[C.F_CHANNELS])
        """(H, W, C) of one image."""
        self.input_range: tuple[float, float] = input_range(self.metadata)
        """The pixel range the images take (the export's ``input.range``)."""
        self.class_names: tuple[str, ...] = tuple(self.metadata[C.CK_CLASS_NAMES])

    def logits(self, images: np.ndarray, chunk_size: int = 64) -> np.ndarray:
        """The class scores f32[N, k] (``classify``'s ``logits``) of float32 images [N, H, W, C] in
        ``input_range``, ``chunk_size`` images per call.

        Raises:
          ValueError: images of another shape or dtype.
        """
        images = np.asarray(images)
        if images.dtype != np.float32 or images.ndim != 4 or images.shape[1:] != self.input_shape:
            raise ValueError(f"images must be float32 [N, {', '.join(map(str, self.input_shape))}]; got "
                             f"{images.dtype} {list(images.shape)}")
        parts = [self._runner(**{C.IMAGES: images[i:i + chunk_size]})[C.LOGITS]
                 for i in range(0, images.shape[0], chunk_size)]
        return np.concatenate(parts) if parts else np.zeros((0, len(self.class_names)), np.float32)
