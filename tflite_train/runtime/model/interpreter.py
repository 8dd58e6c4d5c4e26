"""A TF-free wrapper over the signatures of an exported trainable model, with boundary checks.

``TrainableModel`` checks the file and its metadata, opens it on the interpreter that
``interpreter_choice`` picks (the runtime, and whether the CompiledModel with XNNPACK's weight cache or an
explicit XNNPACK delegate runs it), and calls its signatures: the train signature for the current
selection, the cached cut's signatures, the episode and accumulation steps, the state.
With the explicit XNNPACK delegate of tflite-runtime 2.14 (``interpreter_choice``'s docstring says why),
steps never run from the cached cut (a ``features_<layer>`` then ``train_step_from_<layer>``
sequence crashed 2.14's delegate in the Pi-env tests): ``train_step`` takes the general signature or a
variant, and ``adapt`` full steps.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.model.cached_cut import CachedCut, cached_cuts
from tflite_train.runtime.model.compiled_signatures import CompiledRunner, CompiledSignatures
from tflite_train.runtime.model.flatbuffer_graph import read_graph
from tflite_train.runtime.model.integrity import check_model_bytes
from tflite_train.runtime.model.interpreter_choice import (  # re-exported: the names this module has always offered
    CACHE_UNSAFE_XNNPACK,
    EXPLICIT_XNNPACK_MODULES,
    INTERPRETER_MODULES,
    WEIGHT_CACHE_MODULES,
    load_interpreter_class,
    open_interpreter,
)
from tflite_train.runtime.model.metadata import read_metadata, read_signature_defs
from tflite_train.runtime.model.model_metadata_schema import check_model_metadata
from tflite_train.runtime.model.signature_subset import keep_signatures, keep_state_outputs, skip_initial_values
from tflite_train.runtime.model.xnnpack import delegated_node_count

__all__ = ["CACHE_UNSAFE_XNNPACK", "EXPLICIT_XNNPACK_MODULES", "INTERPRETER_MODULES", "NO_INPUT", "WEIGHT_CACHE_MODULES",
           "TrainableModel", "load_interpreter_class"]

LOG = logging.getLogger(__name__)
NO_INPUT = np.array(0, np.int32)
"""Value of the contract's dummy input (``get_state``, ``reset_state``; CONTRACT.md)."""
NON_UPDATING_SIGNATURES = frozenset({C.INFER, C.FISHER, C.GET_STATE, C.SET_STATE, C.RESET_STATE, C.SET_HEAD,
                                     C.SET_HPARAMS, C.SET_SELECTION})
"""Signatures that read no optimizer slot (with ``features_*`` and ``infer_from_*``); any other may update the
selected layers (``TrainableModel.unset_state``)."""


def _read(path: str | os.PathLike, mutable: bool) -> bytes | bytearray:
    """A file's bytes; into a bytearray when they are to be edited (no second copy of the file)."""
    with open(path, "rb") as f:
        if not mutable:
            return f.read()
        data = bytearray(os.fstat(f.fileno()).st_size)
        del data[f.readinto(data):]  # a file that shrank meanwhile fails the integrity check
        return data


def run_reading(runner: Any, inputs: Mapping[str, np.ndarray], read: Collection[str]) -> dict[str, np.ndarray]:
    """Runs a signature runner on ``inputs`` and returns only the outputs ``read``.

    ``CompiledSignatures``' runner writes the other outputs into one scratch buffer (``CompiledRunner.run``). An
    ``Interpreter``'s ``SignatureRunner`` runs as its ``__call__`` does (resize, allocate, set, invoke), then
    copies out only the read outputs: the others stay in the interpreter's arena, where every run leaves
    them anyway (``get_state`` of EfficientNet-Lite0@128: 33 MiB not copied). A runner of another version
    (without the attributes read here) runs whole and the other outputs are dropped.
    """
    if isinstance(runner, CompiledRunner):
        return runner.run(inputs, read)
    try:
        wrapper, index = runner._interpreter_wrapper, runner._subgraph_index
        input_index, output_index = dict(runner._inputs), dict(runner._outputs)
    except AttributeError:
        return {name: value for name, value in runner(**inputs).items() if name in read}
    if set(inputs) != set(input_index):
        raise ValueError(f"the signature takes inputs {sorted(input_index)}; got {sorted(inputs)}")
    for name, value in inputs.items():
        wrapper.ResizeInputTensor(input_index[name], np.array(np.shape(value), np.int32), False, index)
    wrapper.AllocateTensors(index)
    for name, value in inputs.items():
        wrapper.SetTensor(input_index[name], value, index)
    wrapper.Invoke(index)
    return {name: wrapper.GetTensor(output_index[name], index) for name in read}


class TrainableModel:
    """An exported ``.tflite`` trainable model on a TFLite interpreter.

    All signatures share one interpreter, hence the state held in its resource variables.

    Args:
      model: Path or bytes of the ``.tflite`` file.
      runtime: Preferred interpreter module (e.g. ``"tflite_runtime.interpreter"``), or None.
      num_threads: Interpreter threads.
      xnnpack: On a runtime listed in ``EXPLICIT_XNNPACK_MODULES``, create the XNNPACK delegate
        explicitly (opt-in: ``interpreter_choice``'s docstring); False: builtin kernels only.
      weight_cache: On a runtime listed in ``WEIGHT_CACHE_MODULES``, run the signatures on its
        CompiledModel API with XNNPACK's in-memory weight cache, which packs each constant once for
        every signature (``compiled_signatures``: about 200 MiB less on EfficientNet-Lite0@128, the
        same outputs), when every tensor shape of the file follows from its input shapes
        (``static_shapes.value_shaped_operators`` finds no operator whose output shape depends on
        tensor values, read from the file before any native code runs: the CompiledModel sizes output
        buffers before running, and such an output overflows them at a new batch size, a crash;
        e.g. Keras' ``Dense`` on 4-D activations, as in a ConvNeXt block); else, or False, or an older
        ai-edge-litert: its ``Interpreter``.
      max_rows: Most images (or activations) one ``infer``/``features`` call hands the interpreter; a
        larger batch runs in chunks of this many, with the same rows up to float rounding (the
        interpreter keeps a signature's tensors sized for the largest batch it has run: on
        EfficientNet-Lite0@128, ``features`` at 32 images holds about 110 MiB). None: no limit. Not
        applied with the explicit XNNPACK delegate, which breaks on batch-size changes (``interpreter_choice``).
      signatures: Open only these signatures (``signature_subset``: the others' subgraphs are emptied
        before the interpreter is built, so nothing is allocated or packed for them; calling one is a
        ValueError); None: all.
      state_outputs: ``get_state`` reads only these state variables (``signature_subset.keep_state_outputs``:
        the other outputs are neither computed nor given memory; reading another is a ValueError); None: all.
      unset_state: State variables the file's initialiser leaves unassigned (``signature_subset.skip_initial_values``:
        they take no memory until ``set_state``, or a ``reset_state`` that runs, assigns them all), and
        ``get_state`` does not read (``state_outputs`` without them); a train step with a channel of their layer
        selected is a ValueError while they are unset. Or a function of the model (its metadata read) that
        returns them, e.g. ``TrainableModel.slot_names``. None: all assigned.
      edit: ``edit(content, model)`` changes the verified bytes in place before the interpreter is
        built (``model`` has its metadata, ``state_specs`` and layer attributes; e.g.
        ``adapted_constants.adapted_constants_edit``).

    Raises:
      ValueError: the file is not a trainable model, or its graph does not match its metadata
        (``tflite_train.contract.ContractError``, naming the field, the metadata value and the graph
        value); raised before the interpreter is built.

    ``train_step`` runs the shallowest train signature whose backward reaches the deepest selected
    layer: a cached cut's ``features_<layer>`` + ``train_step_from_<layer>`` (metadata ``cached_cuts``)
    or a depth-specific variant (metadata ``train_variants``), else the general ``train_step``; the
    wrapper tracks the selection through ``set_selection``/``set_state``/``reset_state``.

    Files with the episode signatures (``CachedCut.episode_signature``/``accumulate_signature``,
    ``can_accumulate``) also step from the cache with prototypes computed in the graph
    (``episode_step_from``) and accumulate a batch's gradient over several calls (``accumulate_from``, then
    ``apply_accumulated``).
    """

    def __init__(
        self,
        model: str | os.PathLike | bytes,
        runtime: str | None = None,
        num_threads: int = 1,
        xnnpack: bool = False,
        weight_cache: bool = True,
        max_rows: int | None = None,
        signatures: Collection[str] | None = None,
        edit: Callable[[bytearray, "TrainableModel"], None] | None = None,
        state_outputs: Collection[str] | None = None,
        unset_state: Collection[str] | Callable[["TrainableModel"], Collection[str]] | None = None,
    ) -> None:
        self._source = model
        content, source = self._read_source(mutable=edit is not None or signatures is not None
                                            or state_outputs is not None or bool(unset_state))
        check_model_bytes(bytes(content), source)
        self.metadata: dict[str, Any] = check_model_metadata(read_metadata(content, source), source)
        signature_defs = read_signature_defs(content)
        C.validate_graph(self.metadata, signature_defs)
        self.state_specs: dict[str, tuple[tuple[int, ...], str]] = dict(signature_defs[C.GET_STATE][C.F_OUTPUTS])
        """(shape, dtype) of every state variable: the file's ``get_state`` outputs."""
        interpreter_cls, self.runtime = load_interpreter_class(runtime)
        self.explicit_xnnpack = False
        """True when this wrapper applied an explicitly created XNNPACK delegate (``open_interpreter``)."""
        self._runners: dict[str, Any] = {}
        self._allocated: dict[str, tuple] = {}
        self.max_rows = max_rows
        inp = self.metadata[C.F_INPUT]
        self.input_shape = (inp[C.F_HEIGHT], inp[C.F_WIDTH], inp[C.F_CHANNELS])
        self.capacity = int(self.metadata[C.F_CLASS_CAPACITY])
        self.feature_dim = int(self.metadata[C.F_FEATURE_DIM])
        layers = self.metadata[C.F_LAYERS]
        by_name = {layer[C.F_NAME]: layer for layer in layers}
        self.candidates: list[str] = list(self.metadata[C.F_CANDIDATES])
        self.candidate_channels = {name: int(by_name[name][C.F_OUT_CHANNELS]) for name in self.candidates}
        self.num_classes = 0
        self._layer_index = {layer[C.F_NAME]: int(layer[C.F_INDEX]) for layer in layers}
        self._variants = sorted(((int(v[C.F_LOWEST_INDEX]), v[C.F_SIGNATURE])
                                 for v in self.metadata.get(C.F_TRAIN_VARIANTS, [])), reverse=True)
        self._deepest_selected: int | None = None
        self._selected: frozenset[str] = frozenset()
        self.optimizer: str = self.metadata[C.F_OPTIMIZER][C.F_NAME]
        """The optimizer of the train steps (``contract.OPTIMIZER_SLOTS``)."""
        self.cached_cuts: tuple[CachedCut, ...] = cached_cuts(self.metadata)
        """The cached cuts, ascending (empty for files exported without them)."""
        self.signatures: frozenset[str] | None = None
        """The signatures this model opened (None: all of the file's)."""
        self.state_outputs: frozenset[str] | None = None
        """The state variables ``get_state`` reads (None: all)."""
        self.unset_state: frozenset[str] = frozenset()
        """The state variables no call has assigned yet (``unset_state``; emptied by ``set_state`` and by a
        ``reset_state`` that runs)."""
        self._open_options = (interpreter_cls, num_threads, xnnpack, weight_cache, edit)
        if callable(unset_state):
            unset_state = unset_state(self)
        # rebound: the bytes as read (and the graph read from them) are released once their edited copy exists,
        # so that the interpreter is built beside one copy of the file, not two
        content = self._prepared(content, signatures, state_outputs, unset_state)
        self._open(content)

    def _prepared(self, content: bytes | bytearray, signatures: Collection[str] | None,
                  state_outputs: Collection[str] | None, unset_state: Collection[str] | None) -> bytes:
        """The checked ``content`` as the interpreter gets it: edited, cut to ``signatures``, ``get_state`` to
        ``state_outputs``, ``unset_state`` left unassigned (a copy when any of them applies)."""
        edit = self._open_options[-1]
        self.signatures = None if signatures is None else frozenset(signatures)
        self.state_outputs = None if state_outputs is None else frozenset(state_outputs)
        self.unset_state = frozenset()
        self._pristine, self._initialised_by_first_call = True, False
        if edit is None and signatures is None and state_outputs is None and not unset_state:
            return bytes(content)
        data = bytearray(content) if isinstance(content, bytes) or content is self._source else content
        return bytes(self._edited(data, edit, signatures, unset_state or ()))

    def _open(self, content: bytes) -> None:
        """Builds the interpreter of ``content`` (``_prepared``)."""
        interpreter_cls, num_threads, xnnpack, weight_cache, _ = self._open_options
        self.interpreter, self.explicit_xnnpack = open_interpreter(
            interpreter_cls, self.runtime, bytes(content), num_threads, xnnpack=xnnpack, weight_cache=weight_cache,
            quantized=self.metadata.get(C.F_CONFIG, {}).get("quantize") or "")

    def close(self) -> None:
        """Drops the interpreter: every arena its signatures allocated (each kept until then, sized for its
        largest call) and the state variables are freed with it. No signature runs until ``reopen``."""
        self._runners.clear()
        self._allocated.clear()
        self.interpreter = None
        self.num_classes = 0
        self._deepest_selected, self._selected = None, frozenset()

    def reopen(self, signatures: Collection[str] | None, state_outputs: Collection[str] | None = None,
               unset_state: Collection[str] | None = None) -> None:
        """Builds a new interpreter of the same file on only ``signatures`` (None: all), its ``get_state``
        reading only ``state_outputs`` (None: all), ``unset_state`` left unassigned (the constructor's
        argument), with the options the model was opened with; the current
        one is dropped first (``close``: call it yourself to act between the two, e.g. hand the freed heap
        back with ``free_memory``), so the two are never held together.

        The model then stands as freshly opened: the exported initial state (``reset_state`` runs nothing
        then: its docstring), no classes, nothing selected. A phase that calls fewer signatures than the last
        one runs without the others' arenas and preparation.

        Raises:
          ValueError: a signature or state variable the file does not have, or the file's metadata changed
            since it was opened.
        """
        self.close()
        content, source = self._read_source(mutable=True)
        check_model_bytes(bytes(content), source)
        if check_model_metadata(read_metadata(content, source), source) != self.metadata:
            raise ValueError(f"{source} changed since it was opened (another metadata); open it again")
        content = self._prepared(content, signatures, state_outputs, unset_state)  # rebound: one copy of the file (__init__)
        self._open(content)

    def _read_source(self, mutable: bool) -> tuple[bytes | bytearray, str]:
        """(bytes of the file or of the given bytes, how messages name them)."""
        if isinstance(self._source, (bytes, bytearray)):
            return self._source, "model bytes"
        return _read(self._source, mutable=mutable), str(self._source)

    def _edited(self, data: bytearray, edit: Callable[[bytearray, "TrainableModel"], None] | None,
                signatures: Collection[str] | None, unset_state: Collection[str]) -> bytearray:
        """``data`` with ``edit`` applied, only ``signatures`` kept, ``unset_state`` left unassigned and ``get_state``
        cut to ``state_outputs`` without them, in place; notes whether every opened signature starts with the
        file's initialiser (``reset_state``)."""
        graph = read_graph(data)
        opened = graph.signatures if signatures is None else signatures
        self._initialised_by_first_call = C.RESET_STATE in opened and graph.initialiser(opened) is not None
        if edit is not None:
            edit(data, self)
        if signatures is not None:
            keep_signatures(data, signatures, graph)
        self.unset_state = skip_initial_values(data, unset_state, opened, graph)
        if self.unset_state:  # get_state reads every output it keeps: not the unset ones
            self.state_outputs = (self.state_outputs or frozenset(self.state_specs)) - self.unset_state
        if self.state_outputs is not None and not keep_state_outputs(data, self.state_outputs, graph):
            self.state_outputs = None  # get_state left whole: it reads every variable
        return data

    @property
    def delegated(self) -> bool:
        """True when a delegate (XNNPACK) runs part of the primary subgraph (explicit or the runtime's default)."""
        if isinstance(self.interpreter, CompiledSignatures):
            return self.interpreter.delegated
        return delegated_node_count(self.interpreter) > 0

    def _train_route(self) -> tuple[str, CachedCut | None]:
        """(signature, cut) of a step from images for the current selection: the train signature whose
        backward starts highest while still reaching the deepest selected layer. A cached cut (metadata
        ``cached_cuts``) runs as ``features_<layer>`` then ``train_step_from_<layer>`` (the same
        computation as a depth-specific ``train_step_<layer>``, which the export then leaves out);
        else the highest variant (metadata ``train_variants``) at or below the deepest selected layer;
        else ``train_step`` (also for an empty selection)."""
        if self._deepest_selected is None:
            return C.TRAIN_STEP, None
        variant, variant_cut = C.TRAIN_STEP, -1
        for cut, name in self._variants:
            if cut <= self._deepest_selected:
                variant, variant_cut = name, cut
                break
        cached = None if self.cache_unsafe else self.cache_cut()
        if cached is not None and cached.index >= variant_cut:
            return cached.train_step, cached
        return variant, None

    def train_signature(self) -> str:
        """The train signature a step from images runs for the current selection (``_train_route``)."""
        return self._train_route()[0]

    @property
    def cache_unsafe(self) -> str:
        """Why this interpreter must not run the cache's signature sequence (``interpreter_choice``), or ""."""
        return CACHE_UNSAFE_XNNPACK if self.explicit_xnnpack else ""

    def cache_cut(self) -> CachedCut | None:
        """The cut a cached step uses for the current selection: the highest cut at or below the deepest
        selected layer; None when nothing is selected or the file has no cut that low."""
        if self._deepest_selected is None:
            return None
        usable = [cut for cut in self.cached_cuts if cut.index <= self._deepest_selected]
        return usable[-1] if usable else None

    def _track_selection(self, masks: Mapping[str, np.ndarray]) -> None:
        selected = [n for n in self.candidates if np.any(np.asarray(masks[n]) > 0.5)]
        self._selected = frozenset(selected)
        self._deepest_selected = min(self._layer_index[n] for n in selected) if selected else None

    def _check_state_read(self, signature: str) -> None:
        """Refuses a call that would read a variable of ``unset_state``: ``get_state`` of one, or a signature that
        updates the weights (any but the forward, Fisher and state ones) with a channel of its layer selected."""
        if signature == C.GET_STATE:  # its graph reads every output it keeps, whatever is copied out
            wanted: Collection[str] = self.state_specs if self.state_outputs is None else self.state_outputs
        elif signature in NON_UPDATING_SIGNATURES or signature.startswith((C.FEATURES_PREFIX, C.INFER_FROM_PREFIX)):
            return
        else:
            wanted = [key for layer in self._selected for key in C.layer_state(layer, self.optimizer)]
        unset = sorted(self.unset_state.intersection(wanted))
        if unset:
            raise ValueError(f"signature {signature!r} would read {unset[:4]}{' ...' if len(unset) > 4 else ''}, which "
                             "this model was opened without (unset_state); set_state or reset_state assigns them")

    def _runner(self, name: str):
        if self.interpreter is None:
            raise ValueError(f"signature {name!r}: the model was closed; reopen it")
        if self.signatures is not None and name not in self.signatures:
            raise ValueError(f"signature {name!r} was not opened: this model opened only {sorted(self.signatures)}")
        if name not in self._runners:
            self._runners[name] = self.interpreter.get_signature_runner(name)
        return self._runners[name]

    def _allocate(self, signature: str, inputs: Mapping[str, np.ndarray]) -> None:
        """Resizes and allocates a signature for new input shapes before it runs (explicit XNNPACK only).

        On tflite-runtime 2.14 with the explicitly created delegate, the first ``AllocateTensors``
        after an input resize of ``train_step`` can fail once (re-preparing a delegated IF branch) and
        succeeds when repeated; nothing has run at that point, so it is repeated once here, before
        the runner invokes (the runner's own resize and allocation are then no-ops).
        """
        shapes = tuple(sorted((k, np.shape(v)) for k, v in inputs.items()))
        if self._allocated.get(signature) == shapes:
            return
        runner = self._runner(signature)
        try:
            wrapper, index, names = runner._interpreter_wrapper, runner._subgraph_index, runner._inputs
        except AttributeError:  # another runtime version: the runner allocates as usual
            return
        for name, value in inputs.items():
            wrapper.ResizeInputTensor(names[name], np.array(np.shape(value), np.int32), False, index)
        try:
            wrapper.AllocateTensors(index)
        except RuntimeError:
            LOG.debug("%s: re-allocating %s after an input resize", self.runtime, signature)
            wrapper.AllocateTensors(index)
        self._allocated[signature] = shapes

    def call(self, signature: str, *, read: Collection[str] | None = None, **inputs: np.ndarray) -> dict[str, np.ndarray]:
        """Runs a signature with no checks (outputs are the caller's own arrays); tracks the selection it sets.

        ``read``: return only these outputs (``run_reading``: the others are not copied out), or None: all.
        """
        if self.explicit_xnnpack:
            self._allocate(signature, inputs)
        runner = self._runner(signature)
        if self.unset_state:
            self._check_state_read(signature)
        self._pristine = False
        out = runner(**inputs) if read is None else run_reading(runner, inputs, read)
        if signature == C.SET_SELECTION:
            parts = np.split(np.asarray(inputs[C.CHANNEL_MASK]),
                             np.cumsum([self.candidate_channels[n] for n in self.candidates])[:-1])
            self._track_selection(dict(zip(self.candidates, parts)))
        elif signature == C.SET_STATE:
            self._track_selection({n: inputs[n + C.MASK_SUFFIX] for n in self.candidates})
            self.unset_state = frozenset()
        elif signature == C.RESET_STATE:
            self._deepest_selected, self._selected, self.unset_state = None, frozenset(), frozenset()
        return {k: np.asarray(v) for k, v in out.items()}  # the runners return fresh arrays

    def _call_by_rows(self, signature: str, name: str, rows: np.ndarray) -> dict[str, np.ndarray]:
        """``call(signature, name=rows)``, in chunks of at most ``max_rows`` rows (outputs concatenated)."""
        limit = None if self.explicit_xnnpack else self.max_rows
        if not limit or rows.shape[0] <= limit:
            return self.call(signature, **{name: rows})
        parts = [self.call(signature, **{name: rows[i:i + limit]}) for i in range(0, rows.shape[0], limit)]
        return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}

    # --------------------------------------------------------------- validation
    def _images(self, images: Any) -> np.ndarray:
        if not isinstance(images, np.ndarray):
            raise TypeError(f"images must be a numpy array; got {type(images).__name__}")
        if images.dtype != np.float32:
            raise TypeError(f"images must be float32; got dtype {images.dtype}")
        if images.ndim != 4 or tuple(images.shape[1:]) != self.input_shape or images.shape[0] < 1:
            raise ValueError(f"images must have shape [N>=1, {', '.join(map(str, self.input_shape))}]; got {images.shape}")
        return np.ascontiguousarray(images)

    def _labels(self, labels: Any, n: int) -> np.ndarray:
        labels = np.asarray(labels)
        if labels.ndim != 1 or labels.shape[0] != n or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"labels must be an int array of shape [{n}]; got {labels.dtype} {labels.shape}")
        if self.num_classes < 1:
            raise ValueError("set_head must be called before labels can be used (num_classes is 0)")
        if labels.min() < 0 or labels.max() >= self.num_classes:
            raise ValueError(f"labels must lie in 0..{self.num_classes - 1}; got range {labels.min()}..{labels.max()}")
        return labels.astype(np.int32)

    # --------------------------------------------------------------- signatures
    def infer(self, images: np.ndarray) -> dict[str, np.ndarray]:
        """``embeddings`` [N, D] and ``logits`` [N, K_max].

        Raises:
          RuntimeError: the runtime returned another number of rows than images (seen with
            tflite-runtime 2.14's explicit XNNPACK delegate after a batch-size change, ``xnnpack=True``).
        """
        images = self._images(images)
        out = self._call_by_rows(C.INFER, C.IMAGES, images)
        rows = {k: np.shape(v)[0] for k, v in out.items()}
        if any(r != images.shape[0] for r in rows.values()):
            raise RuntimeError(f"{self.runtime}: infer returned {rows} rows for {images.shape[0]} images"
                               + (" (tflite-runtime 2.14's XNNPACK delegate does not follow this batch-size change;"
                                  " open the model without xnnpack=True)" if self.explicit_xnnpack else ""))
        return out

    def fisher(self, images: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
        """Per-channel Fisher information Delta_o of every candidate layer (TinyTrain Eq. 1)."""
        images = self._images(images)
        return self.call(C.FISHER, **{C.IMAGES: images, C.LABELS: self._labels(labels, images.shape[0])})

    def train_step(self, images: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """One optimizer step on the selected channels; returns loss and accuracy."""
        images = self._images(images)
        labels = self._labels(labels, images.shape[0])
        signature, cut = self._train_route()
        if cut is not None:
            return self.train_step_from(cut, self.features(cut, images), labels)
        out = self.call(signature, **{C.IMAGES: images, C.LABELS: labels})
        return {k: float(v) for k, v in out.items()}

    def _activations(self, cut: CachedCut, activations: Any) -> np.ndarray:
        if not isinstance(activations, np.ndarray) or activations.dtype != np.float32:
            raise TypeError(f"activations must be a float32 numpy array; got {type(activations).__name__} "
                            f"{getattr(activations, 'dtype', '')}")
        if activations.ndim != len(cut.shape) + 1 or tuple(activations.shape[1:]) != cut.shape or activations.shape[0] < 1:
            raise ValueError(f"activations at {cut.layer!r} must have shape [N>=1, {', '.join(map(str, cut.shape))}]; "
                             f"got {activations.shape}")
        return np.ascontiguousarray(activations)

    def _cut(self, cut: CachedCut | str) -> CachedCut:
        for known in self.cached_cuts:
            if cut in (known, known.layer):
                return known
        raise ValueError(f"{cut!r} is not a cached cut of this model; it has {[c.layer for c in self.cached_cuts]}")

    def features(self, cut: CachedCut | str, images: np.ndarray) -> np.ndarray:
        """The activation at ``cut`` (``features_<layer>``): f32 [N, *cut.shape], with the current state."""
        cut = self._cut(cut)
        return self._call_by_rows(cut.features, C.IMAGES, self._images(images))[C.ACTIVATIONS]

    def _cut_step_inputs(self, cut: CachedCut | str, activations: Any, labels: Any) -> tuple[CachedCut, dict]:
        """(cut, {activations, labels}) of a step from cached activations, checked.

        Raises:
          ValueError: not a cut of the model, a layer below the cut is selected (the step would not update
            it), or ill-shaped activations or labels.
        """
        cut = self._cut(cut)
        if self._deepest_selected is not None and self._deepest_selected < cut.index:
            raise ValueError(f"a layer below {cut.layer!r} is selected; a step from its cache would not update it")
        activations = self._activations(cut, activations)
        return cut, {C.ACTIVATIONS: activations, C.LABELS: self._labels(labels, activations.shape[0])}

    def train_step_from(self, cut: CachedCut | str, activations: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """One optimizer step from cached activations (``train_step_from_<layer>``); returns loss and accuracy.

        Raises:
          ValueError: a layer below the cut is selected (the step would not update it).
        """
        cut, inputs = self._cut_step_inputs(cut, activations, labels)
        out = self.call(cut.train_step, **inputs)
        return {k: float(v) for k, v in out.items()}

    @staticmethod
    def _optional(cut: CachedCut, signature: str | None, what: str) -> str:
        if signature is None:
            raise ValueError(f"this model has no {what} at cut {cut.layer!r} (exported without episode signatures); "
                             "re-export it")
        return signature

    def episode_step_from(self, cut: CachedCut | str, activations: np.ndarray, labels: np.ndarray,
                          support_mask: np.ndarray) -> dict[str, float]:
        """One optimizer step on an episode's ProtoNet loss, prototypes computed in the graph
        (``episode_step_from_<layer>``, ``converters.cosine_head``).

        The embeddings e of all rows come from the current weights; the prototype of class k is the mean e
        of the support rows (``support_mask`` 1) labelled k (zero when there is none); the loss is the mean
        cross-entropy of the query rows' (``support_mask`` 0) cosine logits, and its gradient reaches the
        selected channels through the query embeddings and the prototypes. Then ``step += 1`` and the
        optimizer step of ``train_step_from``. The ``prototypes`` state is neither read nor written; classes
        >= ``num_classes`` (``set_head``) are masked.

        Args:
          cut: A cached cut (``cached_cuts``) or its layer name.
          activations: f32 [N, *cut.shape], the rows' activations at the cut (``features``).
          labels: int [N], each row's class in 0..num_classes - 1.
          support_mask: [N] of 0/1: 1 = support row, 0 = query row; at least one of each.

        Returns:
          loss and accuracy over the query rows, before the update.

        Raises:
          ValueError: the file has no episode signature at the cut, a layer below the cut is selected, or
            ill-shaped inputs.
        """
        cut, inputs = self._cut_step_inputs(cut, activations, labels)
        signature = self._optional(cut, cut.episode_signature, "episode_step_from signature")
        n = inputs[C.LABELS].shape[0]
        support = np.asarray(support_mask)
        if support.shape != (n,) or not np.all((support == 0) | (support == 1)):
            raise ValueError(f"support_mask must be a 0/1 array of shape ({n},); got {support.dtype} {support.shape}")
        if support.all() or not support.any():
            raise ValueError("support_mask must mark at least one support row (1) and one query row (0)")
        out = self.call(signature, **inputs, **{C.SUPPORT_MASK: support.astype(np.float32)})
        return {k: float(v) for k, v in out.items()}

    def accumulate_from(self, cut: CachedCut | str, activations: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """Adds the gradient of the rows' summed ``train_step_from`` losses (against the ``prototypes`` state)
        into the model's accumulators (``accumulate_from_<layer>``, ``converters.gradient_accumulation``); no
        weight, slot or step changes. ``apply_accumulated`` then steps with their mean: rows fed in any
        chunks give the step of one ``train_step_from`` on all of them. ``set_selection``, ``set_state`` and
        ``reset_state`` discard a pending accumulation.

        Returns:
          The mean loss and the accuracy of these rows.

        Raises:
          ValueError: the file has no accumulation signature at the cut, a layer below the cut is selected, or
            ill-shaped inputs.
        """
        cut, inputs = self._cut_step_inputs(cut, activations, labels)
        out = self.call(self._optional(cut, cut.accumulate_signature, "accumulate_from signature"), **inputs)
        return {k: float(v) for k, v in out.items()}

    @property
    def can_accumulate(self) -> bool:
        """True when the file has ``apply_accumulated`` (metadata ``apply_accumulated_signature``)."""
        return C.F_APPLY_ACCUMULATED_SIGNATURE in self.metadata

    def apply_accumulated(self) -> None:
        """One optimizer step (``step += 1``) with the mean accumulated gradient, then zero the accumulators
        (``apply_accumulated``); with nothing accumulated since the last apply, set_selection, set_state or
        reset_state, nothing changes (no step).

        Raises:
          ValueError: the file has no ``apply_accumulated`` (``can_accumulate`` is False).
        """
        if not self.can_accumulate:
            raise ValueError("this model has no apply_accumulated signature (exported without episode signatures); "
                             "re-export it")
        self.call(self.metadata[C.F_APPLY_ACCUMULATED_SIGNATURE], **{C.DUMMY: NO_INPUT})

    def infer_from(self, cut: CachedCut | str, activations: np.ndarray) -> dict[str, np.ndarray]:
        """``embeddings`` and ``logits`` from cached activations (``infer_from_<layer>``)."""
        cut = self._cut(cut)
        return self.call(cut.infer, **{C.ACTIVATIONS: self._activations(cut, activations)})

    def set_head(self, prototypes: np.ndarray) -> None:
        """Sets the class prototypes [K, D] (K <= capacity; zero-padded to the capacity)."""
        prototypes = np.asarray(prototypes)
        if prototypes.ndim != 2 or prototypes.shape[1] != self.feature_dim or prototypes.shape[0] < 1:
            raise ValueError(f"prototypes must have shape [K, {self.feature_dim}]; got {prototypes.shape}")
        if prototypes.shape[0] > self.capacity:
            raise ValueError(f"{prototypes.shape[0]} classes exceed the class capacity {self.capacity}")
        if not np.all(np.isfinite(prototypes)):
            raise ValueError("prototypes must be finite")
        padded = np.zeros((self.capacity, self.feature_dim), np.float32)
        padded[: prototypes.shape[0]] = prototypes
        self.call(C.SET_HEAD, **{C.PROTOTYPES: padded, C.NUM_CLASSES: np.array(prototypes.shape[0], np.int32)})
        self.num_classes = prototypes.shape[0]

    def selection_mask(self, selection: Mapping[str, Any]) -> np.ndarray:
        """The concatenated channel mask of ``{layer: channel indices}`` (candidate order).

        Raises:
          ValueError: a non-candidate layer or a channel index out of range.
        """
        if not isinstance(selection, Mapping):
            raise TypeError(f"selection must be a mapping layer -> channel indices; got {type(selection).__name__}")
        parts = []
        for name in selection:
            if name not in self.candidate_channels:
                raise ValueError(f"selection names {name!r}, not a candidate layer; candidates: {self.candidates}")
        for name in self.candidates:
            mask = np.zeros(self.candidate_channels[name], np.float32)
            if name in selection:
                idx = np.asarray(selection[name])
                if idx.size and (not np.issubdtype(idx.dtype, np.integer) or idx.min() < 0 or idx.max() >= mask.size):
                    raise ValueError(f"channels of {name!r} must be ints in 0..{mask.size - 1}; got {idx.tolist()}")
                mask[idx.astype(np.int64)] = 1.0
            parts.append(mask)
        return np.concatenate(parts)

    def set_selection(self, selection: Mapping[str, Any] | np.ndarray) -> None:
        """Selects channels: ``{layer: channel indices}`` or a concatenated 0/1 mask."""
        if isinstance(selection, np.ndarray):
            total = sum(self.candidate_channels.values())
            if selection.shape != (total,) or not np.all((selection == 0) | (selection == 1)):
                raise ValueError(f"channel_mask must be a 0/1 array of shape ({total},); got shape {selection.shape}")
            mask = selection.astype(np.float32)
        else:
            mask = self.selection_mask(selection)
        self.call(C.SET_SELECTION, **{C.CHANNEL_MASK: mask})

    def set_learning_rate(self, learning_rate: float) -> None:
        """Sets the learning rate variable."""
        if not isinstance(learning_rate, (int, float)) or not learning_rate > 0:
            raise ValueError(f"learning_rate must be a positive number; got {learning_rate!r}")
        self.call(C.SET_HPARAMS, **{C.LEARNING_RATE: np.array(learning_rate, np.float32)})

    def get_state(self, names: Collection[str] | None = None) -> dict[str, np.ndarray]:
        """All state variables by name; with ``names``, only those (the same ``get_state`` run, whose other
        outputs are not copied out: ``run_reading``).

        Raises:
          ValueError: ``names`` holds a name that is not a state variable, or one (None: any) that this model's
            ``get_state`` does not read (``state_outputs``).
        """
        if names is not None:
            unknown = sorted(set(names) - set(self.state_specs))
            if unknown:
                raise ValueError(f"{unknown} are not state variables of this model")
        if self.state_outputs is not None:
            unread = sorted(set(self.state_specs if names is None else names) - self.state_outputs)
            if unread:
                raise ValueError(f"this model's get_state reads only {sorted(self.state_outputs)}; not {unread[:5]}"
                                 + (" ..." if len(unread) > 5 else ""))
        if names is None:
            return self.call(C.GET_STATE, **{C.DUMMY: NO_INPUT})
        return self.call(C.GET_STATE, read=frozenset(names), **{C.DUMMY: NO_INPUT})

    def slot_names(self, layers: Collection[str] | None = None) -> frozenset[str]:
        """The optimizer slot variables (``<layer>_<kernel|bias>_<slot>``) of candidate ``layers`` (None: all): what
        a model opened for a phase that trains none of them can leave unset (``unset_state``)."""
        return frozenset(name for layer in (self.candidates if layers is None else layers)
                         for name in C.slot_names(layer, self.optimizer))

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Writes all state variables (the names of ``get_state``), checked against ``state_specs`` (no
        ``get_state`` round trip: it would hold a second copy of the whole state)."""
        if set(state) != set(self.state_specs):
            raise ValueError(f"state must have exactly the keys {sorted(self.state_specs)}; got {sorted(state)}")
        values = {}
        for name, (shape, dtype) in self.state_specs.items():
            value = np.asarray(state[name])
            if value.shape != shape:
                raise ValueError(f"state[{name!r}] must have shape {shape}; got {value.shape}")
            values[name] = value.astype(dtype, copy=False)
        self.call(C.SET_STATE, **values)
        self.num_classes = int(values[C.NUM_CLASSES])

    def reset_state(self) -> None:
        """Restores the exported initial state (zero optimizer slots, empty selection, no classes).

        On a model opened on some signatures or edited (``signatures``, ``edit``, ``reopen``) that no call has
        run on yet, nothing runs when each opened signature starts with the file's variable initialiser
        (``Graph.initialiser``): the first call of any of them assigns every variable its exported value, the
        values ``reset_state`` assigns (``tests/runtime/adaptation/test_phases.py`` compares them), so the state
        is already the exported one there, and ``reset_state``'s arena (its assignments' temporaries: 15 MiB on
        EfficientNet-Lite0@128 with LiteRT, bench/results/MEMORY.md) is not allocated; its ``unset_state`` stays
        unset then. Once anything has run, it runs and assigns every variable.
        """
        if not (self._pristine and self._initialised_by_first_call):
            self.call(C.RESET_STATE, **{C.DUMMY: NO_INPUT})
        self.num_classes = 0
        self._deepest_selected, self._selected = None, frozenset()
