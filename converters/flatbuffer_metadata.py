"""Writes named entries into the ``Model.metadata`` list of a ``.tflite`` flatbuffer."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from tensorflow.lite.python import schema_py_generated as schema

from tflite_train.converters.flatbuffer_rewrite import write_model


def add_metadata(model: bytes, entries: Mapping[str, bytes]) -> bytes:
    """Returns ``model`` with one ``Metadata{name, buffer}`` entry (and buffer) per item of ``entries``.

    Existing entries of the same name are replaced; other metadata (e.g. the converter's
    ``min_runtime_version``) is kept.

    Raises:
      TypeError: if an entry value is not bytes.
    """
    for name, data in entries.items():
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"metadata entry {name!r} must be bytes; got {type(data).__name__}")
    obj = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(model, 0))
    obj.metadata = [m for m in (obj.metadata or []) if _name(m.name) not in entries]
    for name, data in entries.items():
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(bytes(data), dtype=np.uint8)
        obj.buffers.append(buffer)
        entry = schema.MetadataT()
        entry.name = name
        entry.buffer = len(obj.buffers) - 1
        obj.metadata.append(entry)
    return write_model(obj, len(model) + sum(len(d) for d in entries.values()))


def _name(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
