"""An exported model's signatures on ai-edge-litert's CompiledModel API, with XNNPACK's in-memory weight cache.

LiteRT's ``Interpreter`` applies its default XNNPACK delegate to every subgraph of the file at the first
allocation, and XNNPACK packs the constant weights of each delegated subgraph separately. An exported
trainable model reads the same constants from many subgraphs (each signature's copy-on-write branch of
each candidate layer, ``converters.copy_on_write``): on the default EfficientNet-Lite0@128 export 187 MiB
of constants summed over its 507 subgraphs, 12.9 MiB of distinct ones, and the first call of any
signature raises the process's peak RSS by about 210 MiB (``bench/results/MEMORY.md``). The Python
``Interpreter`` has no option for XNNPACK's weight cache; the ``CompiledModel`` API of the same package
has one (``CpuOptions.xnnpack_weight_cache_path``), and its in-memory form (``":memory"``) packs each
distinct constant once for all subgraphs (13.4 MiB on that export). The same interpreter runs underneath:
the resource variables are shared by every signature, and the outputs are bit-identical to the
``Interpreter``'s.

``CompiledSignatures`` offers what ``TrainableModel`` uses of an interpreter: ``get_signature_list`` and
``get_signature_runner(name)``, whose runner takes the inputs as keyword arrays (resizing a changed
input shape first, as the ``Interpreter``'s runner does) and returns fresh arrays; its ``run(inputs, read)``
returns only the outputs ``read``, the others written into one scratch buffer they share (``get_state`` of
the selected layers without a fresh copy of the whole state).

The CompiledModel sizes a signature's output buffers from the output shapes its interpreter reports after
a resize, before running. A model with an output shape known only at run time (``static_shapes``) would
get buffers too small for a new batch size and the kernels would write past them (the crash of a
ConvNeXt-style model; LiteRT issue 5774): ``TrainableModel`` does not open such a model here, and each
runner compares the reported output shapes with the file's declared ones before every run on new input
shapes and raises ``OutputShapeError`` instead of running on a difference.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import sys
import weakref
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from tflite_train.native_stderr import native_stderr_silenced
from tflite_train.runtime.model.flatbuffer_graph import constant_outputs
from tflite_train.runtime.model.metadata import read_signature_defs
from tflite_train.runtime.model.static_shapes import expected_output_shapes

__all__ = ["WEIGHT_CACHE", "CompiledRunner", "CompiledSignatures", "OutputShapeError", "compiled_model_available"]

WEIGHT_CACHE = ":memory"
"""XNNPACK's weight cache path that keeps the packed weights in memory (no file is written)."""
PACKAGE = "ai_edge_litert"


class OutputShapeError(RuntimeError):
    """After an input resize, LiteRT reports output shapes other than the file's declared ones for that batch:
    output buffers sized from them could be too small (``static_shapes``); nothing was run."""


def compiled_model_available() -> bool:
    """True when ai-edge-litert with a CompiledModel API that takes an XNNPACK weight cache is installed."""
    try:
        options = importlib.import_module(f"{PACKAGE}.cpu_options")
        importlib.import_module(f"{PACKAGE}.compiled_model")
    except ImportError:
        return False
    return "xnnpack_weight_cache_path" in getattr(options.CpuOptions, "__dataclass_fields__", {})


_EXIT_REGISTERED: list[bool] = []


def _quiet_exit() -> None:
    """At exit, points file descriptor 2 at /dev/null (once registered): the first buffer write creates a
    process-wide LiteRT environment, destroyed after Python's last output, which logs one line per
    accelerator (Python's own report of an uncaught exception comes before ``atexit``)."""
    if not _EXIT_REGISTERED:
        atexit.register(_silence_stderr)
        _EXIT_REGISTERED.append(True)


def _silence_stderr() -> None:
    sys.stderr.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)


ALIGNMENT = 64
"""Bytes: LiteRT wraps host memory aligned to this (``LITERT_HOST_MEMORY_BUFFER_ALIGNMENT``)."""
HOST_OUTPUT_BYTES = 2**20
"""Outputs of at least this many bytes in all are written into fresh numpy arrays; smaller ones into buffers
kept from call to call and copied out (creating and wrapping fresh buffers costs every call: ``set_head``
0.040 -> 0.050 ms, measured; a copy of a small output costs less)."""


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """(array, storage): an uninitialised C-contiguous array of ``shape`` whose data starts on an ``ALIGNMENT``
    boundary, and the 1-D view of ``max(nbytes, the array's bytes)`` bytes from that start (what LiteRT may
    require of an output buffer; the array is its first elements)."""
    count = int(np.prod(shape, dtype=np.int64))
    items = max(count, -(-nbytes // dtype.itemsize), 1)
    raw = np.empty(items * dtype.itemsize + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    storage = raw[start:start + items * dtype.itemsize].view(dtype)
    return storage[:count].reshape(shape), storage


class CompiledRunner:
    """One signature: ``runner(**inputs) -> {output name: array}``.

    Input buffers are LiteRT's, kept for the last input shapes and written at each call. Large outputs
    (``HOST_OUTPUT_BYTES``) are written by LiteRT straight into fresh numpy arrays (wrapped host memory: no
    copy and no LiteRT-owned output buffer, so ``get_state`` of EfficientNet-Lite0@128 holds its 33 MiB once,
    not twice); small ones into LiteRT buffers kept for the last input shapes, read into fresh arrays.
    The model keeps pointers to the last run's buffers until this signature runs again, so the runner keeps
    them (and the arrays under them) referenced until then: no memory is freed while LiteRT can reach it.
    """

    def __init__(self, owner: "CompiledSignatures", name: str) -> None:
        # a weak reference: the owner alone holds the model, so that it releases the model and every
        # runner's buffers together, with LiteRT's log muted (CompiledSignatures.__del__), and no cycle
        # keeps a model alive until the garbage collector runs
        self._owner, self._name = weakref.ref(owner), name
        self._index = owner.model.get_signature_index(name)
        signature = owner.get_signature_list()[name]
        self._inputs, self._outputs = list(signature["inputs"]), list(signature["outputs"])
        self._shapes: tuple | None = None
        self._buffers: tuple[list, list | None, dict] | None = None
        self._held: tuple | None = None
        """What the model may point at: the last run's buffers and arrays (class docstring)."""
        self._quiet = bool(owner.constant_outputs.get(name))
        """Runs muted: LiteRT logs an INFO line at every run of a signature with a constant output."""

    def release(self) -> None:
        """Drops the buffers and the last outputs (the owner does, once it dropped the model)."""
        self._buffers, self._shapes, self._held = None, None, None

    def _prepare(self, owner: "CompiledSignatures", inputs: Mapping[str, np.ndarray]) -> tuple[list, list | None, dict]:
        """(input buffers, kept output buffers or None for fresh arrays, {output: (shape, dtype, bytes)}) for these
        input shapes."""
        model = owner.model
        shapes = tuple(tuple(np.shape(inputs[n])) for n in self._inputs)
        if shapes != self._shapes or self._buffers is None:
            self._buffers, self._shapes = None, None
            current = model.get_input_tensor_details(self._name)
            for i, (name, shape) in enumerate(zip(self._inputs, shapes)):
                if tuple(current[name]["shape"]) != shape:
                    model.resize_input_tensor(i, list(shape), self._index, strict=False)
            details = model.get_output_tensor_details(self._name)
            self._check_outputs(owner.declared_shapes[self._name], dict(zip(self._inputs, shapes)), details)
            # the natural sizes: a host-memory buffer is the tensor's custom allocation, which TFLite checks
            # against the tensor's bytes
            specs = {n: (tuple(int(d) for d in details[n]["shape"]), np.dtype(details[n]["dtype"]),
                         int(np.prod(details[n]["shape"], dtype=np.int64)) * np.dtype(details[n]["dtype"]).itemsize)
                     for n in self._outputs}
            # LiteRT makes no buffer of its own for an empty output (``signature_subset.keep_state_outputs``)
            host = sum(size for _, _, size in specs.values()) >= HOST_OUTPUT_BYTES or any(
                0 in shape for shape, _, _ in specs.values())
            kept = None if host else [
                model.create_output_buffer_by_name(self._name, n) for n in self._outputs]
            self._buffers = ([model.create_input_buffer_by_name(self._name, n) for n in self._inputs], kept, specs)
            self._shapes = shapes
        return self._buffers

    def _check_outputs(self, declared: Mapping[str, Mapping[str, tuple]], shapes: Mapping[str, tuple],
                       details: Mapping[str, Mapping[str, Any]]) -> None:
        """OutputShapeError unless every output's reported shape is the declared one for these input shapes
        (``static_shapes.expected_output_shapes``): the output buffers are sized from the reported shapes,
        and an output whose shape LiteRT learns only while running would overflow them."""
        expected = expected_output_shapes({n: shape for n, (shape, _) in declared["inputs"].items()}, shapes,
                                          {n: shape for n, (shape, _) in declared["outputs"].items()})
        reported = {n: tuple(int(d) for d in details[n]["shape"]) for n in self._outputs}
        if expected != reported:
            raise OutputShapeError(
                f"signature {self._name!r} on inputs {dict(shapes)}: LiteRT's CompiledModel reports output shapes "
                f"{reported}, not the {expected} the file declares (an output shape known only at run time); not "
                "run. Open the model with weight_cache=False")

    def __call__(self, **inputs: Any) -> dict[str, np.ndarray]:
        return self.run(inputs)

    def run(self, inputs: Mapping[str, Any], read: Collection[str] | None = None) -> dict[str, np.ndarray]:
        """Runs the signature on ``inputs``; returns the outputs ``read`` (None: all) in fresh arrays.

        With ``read``, the other outputs are written into one scratch buffer of the largest of them, which
        they all wrap (nothing reads them, and no operator of a signature reads its own outputs back: the
        ``get_state`` parity test), so the run holds the read outputs and that buffer, not every output.
        """
        if set(inputs) != set(self._inputs):
            raise ValueError(f"signature {self._name!r} takes inputs {self._inputs}; got {sorted(inputs)}")
        owner = self._owner()
        if owner is None or owner.model is None:
            raise RuntimeError(f"signature {self._name!r}: its model was released")
        # muted: a signature with a constant output, and every first call (the first buffer write creates
        # LiteRT's process-wide environment, which logs the accelerators it looked for)
        with native_stderr_silenced() if self._quiet or self._buffers is None else contextlib.nullcontext():
            ins, kept, specs = self._prepare(owner, inputs)
            for name, buffer in zip(self._inputs, ins):
                buffer.write(np.asarray(inputs[name]))
            if read is not None:
                kept = None  # fresh arrays for the read outputs, the scratch for the rest
            arrays, outs = self._output_buffers(owner, kept, specs, read)
            self._held = (self._held, ins, outs, arrays)  # the previous run's too, should this one fail midway
            owner.model.run_by_index(self._index, ins, outs)
            self._held = (ins, outs, arrays)
        if kept is None:
            return {name: array for name, (array, _) in zip(specs, arrays) if read is None or name in read}
        return {name: buffer.read(int(np.prod(shape, dtype=np.int64)), dtype).reshape(shape)
                for buffer, (name, (shape, dtype, _)) in zip(kept, specs.items())}

    @staticmethod
    def _output_buffers(owner: "CompiledSignatures", kept: list | None, specs: Mapping[str, tuple],
                        read: Collection[str] | None) -> tuple[list, list]:
        """(arrays, output buffers) of one run: the kept buffers, or an aligned array per output wrapped as
        host memory; outputs not in ``read`` (when given) all wrap the first bytes of one scratch array."""
        if kept is not None:
            return [], kept
        unread = {name for name, (_, _, size) in specs.items() if read is not None and name not in read and size}
        scratch = aligned_empty((max((specs[n][2] for n in unread), default=0),), np.dtype(np.uint8), 0)[1]
        arrays = [(None, scratch[:spec[2]].view(spec[1])) if name in unread else aligned_empty(*spec)
                  for name, spec in specs.items()]
        return arrays, [owner.host_buffer(storage) for _, storage in arrays]


class CompiledSignatures:
    """The signatures of a ``.tflite`` file on LiteRT's CompiledModel (CPU, XNNPACK, in-memory weight cache).

    Args:
      content: The file's bytes (kept referenced for the model's lifetime).
      num_threads: CPU threads.

    Raises:
      ImportError: ai-edge-litert or its CompiledModel API is missing.
      RuntimeError, ValueError: LiteRT could not compile the model.
    """

    delegated = True
    """The CPU accelerator runs the model on XNNPACK."""

    def __init__(self, content: bytes, num_threads: int = 1) -> None:
        compiled = importlib.import_module(f"{PACKAGE}.compiled_model")
        cpu = importlib.import_module(f"{PACKAGE}.cpu_options")
        options = importlib.import_module(f"{PACKAGE}.options")
        accelerator = importlib.import_module(f"{PACKAGE}.hardware_accelerator")
        self._content = content
        settings = options.Options(hardware_accelerators=accelerator.HardwareAccelerator.CPU,
                                   cpu_options=cpu.CpuOptions(num_threads=num_threads,
                                                              xnnpack_weight_cache_path=WEIGHT_CACHE))
        with native_stderr_silenced():  # the environment logs every accelerator it looked for
            self.model = compiled.CompiledModel.from_buffer(content, options=settings)
        _quiet_exit()
        self._signatures = self.model.get_signature_list()
        self.constant_outputs = constant_outputs(content)
        """Signature -> its outputs that are constants (``flatbuffer_graph.constant_outputs``)."""
        self.declared_shapes = read_signature_defs(content)
        """The file's signature shapes (``metadata.read_signature_defs``: -1 marks the batch)."""
        self.host_buffer = importlib.import_module(f"{PACKAGE}.tensor_buffer").TensorBuffer.create_from_host_memory
        """Wraps a 64-byte aligned, C-contiguous array as a TensorBuffer (no copy; the array must outlive it)."""
        self._runners: dict[str, CompiledRunner] = {}

    def __del__(self) -> None:
        # releasing the model and the buffers destroys their LiteRT environment, which logs one line per
        # accelerator to stderr; only this object holds them (the runners refer to it weakly). The model
        # goes first: it may point into the runners' last output arrays (CompiledRunner docstring)
        if getattr(self, "model", None) is not None:
            with native_stderr_silenced():
                self.model = None
                for runner in self._runners.values():
                    runner.release()

    def get_signature_list(self) -> dict[str, dict[str, list[str]]]:
        """``{signature: {"inputs": [names], "outputs": [names]}}``."""
        return self._signatures

    def get_signature_runner(self, name: str) -> CompiledRunner:
        """The runner of signature ``name`` (ValueError for an unknown one)."""
        if name not in self._signatures:
            raise ValueError(f"Invalid signature_key provided: {name!r}")
        if name not in self._runners:
            self._runners[name] = CompiledRunner(self, name)
        return self._runners[name]
