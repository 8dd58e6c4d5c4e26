"""The ``bake`` command's file-level edge: read the export and the checkpoint once, bake, write atomically.

``run_bake`` reads both inputs as regular files (a FIFO is never opened), refuses an output that would
overwrite an input, bakes (``baked_model.bake_classifier``), checks the result as every reader does
(``baked_classifier.read_baked_metadata``) and writes it with ``atomic_file.write_atomic``: on any failure
nothing is written and an earlier output stays as it was.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import stat

from tflite_train import contract as C
from tflite_train.runtime.atomic_file import write_atomic
from tflite_train.runtime.baked.baked_classifier import read_baked_metadata
from tflite_train.runtime.baked.baked_model import bake_classifier, inference_part_bytes
from tflite_train.runtime.errors import UserError
from tflite_train.runtime.model.metadata import read_metadata
from tflite_train.runtime.output_path import check_output_file
from tflite_train.runtime.text import printable

__all__ = ["BakeResult", "run_bake"]


@dataclasses.dataclass(frozen=True)
class BakeResult:
    """What ``run_bake`` wrote (the file, its size and classes) and the export's inference part to compare."""

    out: str
    size_bytes: int
    class_names: tuple[str, ...]
    inference_constants: int
    inference_tables: int
    head_bytes: int
    """Bytes of the checkpoint's prototypes (float32 [k, D]), which the export's ``infer`` reads from its state."""

    @property
    def inference_part(self) -> int:
        """The export's inference part for this head (``inference_part_bytes`` and the prototypes): the goal is a
        baked file of at most this size."""
        return self.inference_constants + self.inference_tables + self.head_bytes

    def describe(self) -> str:
        """The command's summary lines."""
        names = ", ".join(self.class_names[:8]) + (" ..." if len(self.class_names) > 8 else "")
        return (f"wrote {printable(self.out)}: {len(self.class_names)} classes ({printable(names)}), "
                f"{self.size_bytes / 2**20:.2f} MiB (the export's inference part: {self.inference_part / 2**20:.2f} "
                f"MiB, infer's constants and tables and the {len(self.class_names)} prototypes)\n"
                f"  run it with any TFLite runtime: signature {C.CLASSIFY!r}, input {C.IMAGES!r}, "
                f"output {C.LOGITS!r} [N, {len(self.class_names)}]")


def _read_input(path: str | os.PathLike, what: str) -> bytes:
    """The bytes of a regular file (UserError naming it otherwise; a FIFO is never opened)."""
    shown = printable(os.fspath(path))
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise UserError(f"{what} {shown} is not a regular file")
        return pathlib.Path(path).read_bytes()
    except OSError as err:
        raise UserError(f"{what} {shown}: {err.strerror or err}") from err


def run_bake(model_path: str | os.PathLike, checkpoint_path: str | os.PathLike, out: str | os.PathLike) -> BakeResult:
    """Bakes ``checkpoint_path`` into the export ``model_path`` and writes the classifier to ``out``
    atomically; on any failure nothing is written (an earlier ``out`` stays as it was).

    Raises:
      UserError (OutputError, CheckpointError, BakeError) or another ValueError: one line naming the file.
    """
    model_data = _read_input(model_path, "model file")
    checkpoint_data = _read_input(checkpoint_path, "checkpoint")
    target = check_output_file(out, reserve_bytes=len(model_data), what="classifier")
    for source in (model_path, checkpoint_path):
        if target.exists() and os.path.samefile(target, source):
            raise UserError(f"output {printable(str(target))} would overwrite the input {printable(str(source))}")
    data = bake_classifier(model_data, checkpoint_data, str(model_path), str(checkpoint_path))
    metadata = read_baked_metadata(data, str(target))
    write_atomic(target, data)
    names = tuple(metadata[C.CK_CLASS_NAMES])
    return BakeResult(str(target), len(data), names, *inference_part_bytes(model_data),
                      4 * len(names) * int(read_metadata(model_data)[C.F_FEATURE_DIM]))
