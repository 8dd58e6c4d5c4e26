"""The XNNPACK delegate of tflite-runtime's own library, created explicitly.

tflite-runtime 2.14's pip wheel never applies its default XNNPACK delegate (every op then runs on
the slower builtin kernels; ``bench/results/TFLITE_RUNTIME_FASTPATH.md``), although its native
library contains XNNPACK and exports ``TfLiteXNNPackDelegateCreate``. This module creates that
delegate through ctypes and hands it to ``Interpreter(experimental_delegates=[...])``, which only
needs ``_get_native_delegate_pointer()``. ai-edge-litert applies XNNPACK by default and needs none of
this.
"""

from __future__ import annotations

import ctypes
import importlib

from tflite_train.native_stderr import native_stderr_silenced

__all__ = ["XnnpackDelegate", "delegated_node_count"]


class _Options(ctypes.Structure):
    """``TfLiteXNNPackDelegateOptions`` (TF 2.14: num_threads, flags, weights_cache,
    handle_variable_ops), padded: only ``num_threads`` is written; the library's defaults fill the rest,
    and a struct larger than 16 bytes is returned through a caller-allocated buffer on x86-64 and
    AArch64 alike, so the padding only has to cover the real size."""

    _fields_ = [("num_threads", ctypes.c_int32), ("flags", ctypes.c_uint32), ("weights_cache", ctypes.c_void_p),
                ("handle_variable_ops", ctypes.c_bool), ("_reserved", ctypes.c_byte * 64)]


class XnnpackDelegate:
    """An XNNPACK delegate from the native library of an interpreter module (``tflite_runtime``).

    Args:
      num_threads: Threads of the delegate (the interpreter's ``num_threads``).
      package: The interpreter package whose native wrapper holds XNNPACK.

    Raises:
      OSError: the library cannot be loaded or lacks the XNNPACK symbols.
      RuntimeError: the library returned no delegate.
    """

    def __init__(self, num_threads: int = 1, package: str = "tflite_runtime") -> None:
        wrapper = importlib.import_module(f"{package}._pywrap_tensorflow_interpreter_wrapper")
        lib = ctypes.CDLL(wrapper.__file__)
        try:
            default, create, delete = (lib.TfLiteXNNPackDelegateOptionsDefault, lib.TfLiteXNNPackDelegateCreate,
                                       lib.TfLiteXNNPackDelegateDelete)
        except AttributeError as err:
            raise OSError(f"{wrapper.__file__} exports no XNNPACK delegate: {err}") from err
        default.restype = _Options
        create.restype = ctypes.c_void_p
        create.argtypes = [ctypes.POINTER(_Options)]
        delete.argtypes = [ctypes.c_void_p]
        options = default()
        options.num_threads = int(num_threads)
        self._cache, self._finalize, self._delete_cache = self._weights_cache(lib)
        options.weights_cache = self._cache
        with native_stderr_silenced():  # its INFO line is not one of the CLI's errors
            pointer = create(ctypes.byref(options))
        if not pointer:
            raise RuntimeError("TfLiteXNNPackDelegateCreate returned no delegate")
        self._delete, self._pointer = delete, pointer

    @staticmethod
    def _weights_cache(lib):
        """(cache, finalize, delete) of a weights cache shared by every delegated subgraph, or Nones when
        the library has none. Without it each subgraph packs its own copy of the constant weights it
        reads, and every signature's forward reads the same ones (measured on EfficientNet-Lite0@128's
        TinyTrain export: peak RSS of an ``infer`` process 622 -> 556 MiB, same outputs)."""
        try:
            create, finalize, delete = (lib.TfLiteXNNPackDelegateWeightsCacheCreate,
                                        lib.TfLiteXNNPackDelegateWeightsCacheFinalizeSoft,
                                        lib.TfLiteXNNPackDelegateWeightsCacheDelete)
        except AttributeError:
            return None, None, None
        create.restype = ctypes.c_void_p
        finalize.argtypes, finalize.restype = [ctypes.c_void_p], ctypes.c_bool
        delete.argtypes = [ctypes.c_void_p]
        cache = create()
        return (cache, finalize, delete) if cache else (None, None, None)

    def finalize(self) -> None:
        """Seals the weights cache once the interpreter has applied the delegate (XNNPACK sets up no
        runtime on an unsealed cache); soft: a subgraph prepared later may still add to it.

        Raises:
          RuntimeError: the library refused to seal the cache.
        """
        if self._cache and not self._finalize(self._cache):
            raise RuntimeError("TfLiteXNNPackDelegateWeightsCacheFinalizeSoft failed")

    def _get_native_delegate_pointer(self) -> int:
        return self._pointer

    def __del__(self) -> None:
        # The Interpreter drops its native interpreter before its delegates (tflite Interpreter.__del__).
        if getattr(self, "_pointer", None):
            self._delete(self._pointer)
            self._pointer = None
        if getattr(self, "_cache", None):  # after the delegate whose runtimes read the packed weights
            self._delete_cache(self._cache)
            self._cache = None


def delegated_node_count(interpreter) -> int:
    """Number of ``DELEGATE`` nodes in the interpreter's primary subgraph (0: nothing delegated)."""
    return sum(1 for op in interpreter._get_ops_details() if op.get("op_name") == "DELEGATE")
