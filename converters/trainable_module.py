"""Assembles the signatures of the trainable ``.tflite`` contract (CONTRACT.md) from a graph IR.

The module holds the state variables and builds the signatures; the computation is split by concept:

* forward with copy-on-write weights for the candidate layers: ``converters.copy_on_write``;
* cosine head and cross-entropy gradient: ``converters.cosine_head``;
* backward walk (Fisher potentials, input gradients, the update IFs): ``converters.backward_pass``;
* channel-masked optimizer step: ``converters.optimizer_update``;
* gradient accumulators and their step: ``converters.gradient_accumulation``.

Selection (``set_selection``): one f32 mask variable per candidate layer; a layer's update runs only
when it has a selected channel and changes only the selected channels (``converters.backward_pass``).

The contract's scalar state (``num_classes``, ``step``, ``learning_rate``) is held in shape-[1]
variables and reshaped at the signature boundary: tflite-runtime 2.14's XNNPACK delegate refuses a
whole model (``ModifyGraphWithDelegate`` fails) when any rank-0 resource variable is assigned
(``bench/results/TFLITE_RUNTIME_FASTPATH.md``).
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from tflite_train import contract as C
from tflite_train.contract import state_names
from tflite_train.converters.backward_pass import BackwardPass
from tflite_train.converters.cached_cut import CachedCut, cache_cut
from tflite_train.converters.copy_on_write import DIRTY_SUFFIX, CopyOnWriteForward
from tflite_train.converters.cosine_head import head_logits
from tflite_train.converters.cut_choice import cache_cut_indices, train_cuts
from tflite_train.converters.export_config import ExportConfig
from tflite_train.converters.gradient_accumulation import GradientAccumulation
from tflite_train.converters.graph.ir import Graph
from tflite_train.converters.graph.region import gradient_region
from tflite_train.converters.int8_prefix import PrefixQuantization, calibrate, prefix_nodes
from tflite_train.converters.int8_weights import Int8Kernel, int8_kernel
from tflite_train.converters.ops import registry
from tflite_train.runtime.adaptation.protocol import DEFAULT_PROTOCOL
from tflite_train.sparse.layer_table import LayerTable

signature = functools.partial(tf.function, autograph=False)
"""``tf.function`` for the exported signatures, without AutoGraph: the code branches with explicit
``tf.cond`` and loops over Python structures only, and AutoGraph's source transformation of every
helper was about a quarter of the export's time (cProfile of the ``tiny`` fixture's ``convert``)."""

NO_INPUT = np.array(0, np.int32)
"""The contract's dummy input of ``get_state`` / ``reset_state`` (CONTRACT.md)."""


__all__ = ["NO_INPUT", "TrainableModule", "state_names", "train_variant_name"]


def train_variant_name(table: LayerTable, cut: int) -> str:
    """Signature name of the depth-specific train step whose backward stops at layer ``cut``."""
    return C.train_variant_name(table.layers[cut].name)


class TrainableModule(CopyOnWriteForward, BackwardPass, GradientAccumulation, tf.Module):
    """The exported model as TF code; signatures are listed in ``signatures()``.

    Args:
      config: The export configuration.
      graph: The prepared graph (``converters.graph.passes.prepare_graph``).
      table: Its layer table (``converters.graph.layer_table.graph_layer_table``).
      candidates: Table indices of the candidate layers (``converters.graph.region``), ascending.
      calibration: With ``config.quantize == "int8"``: float32 images [N, H, W, C] in the input range that
        calibrate the int8 prefix (``converters.int8_prefix``); ignored otherwise.

    Raises:
      ValueError: ``config.quantize == "int8"`` without calibration images.
    """

    def __init__(self, config: ExportConfig, graph: Graph, table: LayerTable, candidates: tuple[int, ...],
                 calibration: np.ndarray | None = None) -> None:
        super().__init__(name="tflite_train")
        self.config = config
        self.graph = graph
        self.table = table
        self.candidates = tuple(candidates)
        self.candidate_names = [table.layers[i].name for i in self.candidates]
        by_name = graph.by_name
        self.feature_dim = int(by_name[graph.output].shape[-1])
        self.mask_sizes = [table.layers[i].out_channels for i in self.candidates]
        self._slots = C.optimizer_slots(config.optimizer)
        self._shapes = {n.name: n.shape for n in graph.nodes}
        self._frozen: dict[str, tuple[tf.Tensor, tf.Tensor]] = {}
        self._vars: dict[str, tf.Variable] = {}
        self._initial: dict[str, np.ndarray] = {}
        self._exported: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # candidate -> initial (kernel, bias)
        self._dirty: dict[str, tf.Variable] = {}
        self.int8_kernels: dict[str, Int8Kernel] = {}  # candidate -> its int8 initial kernel (quantize int8)
        self.int8_prefix: PrefixQuantization | None = None
        quantized = bool(config.quantize)  # candidate kernels stored int8 (both modes)
        if config.quantize == "int8" and calibration is None:
            raise ValueError("quantize='int8' needs calibration images")
        for node in graph.weighted():
            kernel, bias = node.weights
            channelwise = registry.weighted_kind(node.op).channelwise  # per-channel scales on axis 2
            if node.name in self.candidate_names:
                if quantized:  # stored int8, dequantized into the float32 variables (converters.int8_weights)
                    self.int8_kernels[node.name] = int8_kernel(kernel, depthwise=channelwise)
                    kernel = self.int8_kernels[node.name].dequantize()
                self._add_var(node.name + C.KERNEL_SUFFIX, kernel)
                self._add_var(node.name + C.BIAS_SUFFIX, bias)
                for slot in self._slots:
                    self._add_var(f"{node.name}{C.KERNEL_SUFFIX}_{slot}", np.zeros_like(kernel))
                    self._add_var(f"{node.name}{C.BIAS_SUFFIX}_{slot}", np.zeros_like(bias))
                self._add_var(node.name + C.MASK_SUFFIX, np.zeros([node.shape[-1]], np.float32))
                self._exported[node.name] = (np.asarray(kernel, np.float32), np.asarray(bias, np.float32))
                self._dirty[node.name] = tf.Variable(np.zeros([1], np.float32), name=node.name + DIRTY_SUFFIX,
                                                     trainable=False)
            else:
                if config.quantize == "int8-weights":  # stored int8, read through DEQUANTIZE by the conv
                    self.int8_kernels[node.name] = int8_kernel(kernel, depthwise=channelwise)
                    kernel = self.int8_kernels[node.name].dequantize()
                self._frozen[node.name] = (tf.constant(kernel), tf.constant(bias))
        k = config.class_capacity
        self._add_var(C.PROTOTYPES, np.zeros([k, self.feature_dim], np.float32))
        self._add_var(C.NUM_CLASSES, np.array(0, np.int32))
        self._add_var(C.STEP, np.array(0.0, np.float32))
        self._add_var(C.LEARNING_RATE, np.array(config.learning_rate, np.float32))
        self.names = state_names(self.candidate_names, config.optimizer)
        self.train_cuts = train_cuts(table, self.candidates, config.train_variants)
        # cache cuts: the lowest candidate and the block cuts a selection can start from (converters.cut_choice)
        cuts = cache_cut_indices(table, self.candidates, config.cache_cuts, DEFAULT_PROTOCOL.compute_fraction)
        self.cache_cuts: tuple[CachedCut, ...] = tuple(
            c for c in (cache_cut(graph, table, i) for i in cuts) if c is not None) if config.cache_signatures else ()
        cached = {c.index for c in self.cache_cuts}
        # A cut with cache signatures needs no image-input variant: features_<layer> + train_step_from_<layer>
        # compute exactly train_step_<layer> (the runtime composes them for a full step).
        self.variant_cuts = tuple(c for c in self.train_cuts if c not in cached)
        if config.episode_signatures and self.cache_cuts:  # accumulate_from_<layer> + apply_accumulated
            self._add_accumulators({name: tuple(v.shape for v in self._exported[name]) for name in self.candidate_names})
        self._regions = {cut: gradient_region(graph, [l.name for l in table.layers[cut:] if l.name in self.candidate_names])
                         for cut in {*cuts, *self.train_cuts}}
        # Candidates upstream of each node's first input: its input gradient is needed iff one is selected.
        self._upstream = {n.name: [c for c in self.candidate_names if c in graph.ancestors(n.inputs[0])]
                          for n in graph.weighted() if n.inputs}
        self.variables_list = [self._vars[n] for n in self.names]
        if config.quantize == "int8":  # ranges of the float prefix, then the forward runs it fake-quantized
            nodes = prefix_nodes(graph, table, self.candidates[0])
            self.int8_prefix = calibrate(self._forward, graph, nodes, calibration,
                                         reverse_channels=config.channel_order == C.CHANNEL_ORDER_BGR)
            self._int8_prefix = self.int8_prefix
        self._build_functions()

    def _add_var(self, name: str, value: np.ndarray) -> None:
        """A state variable; a scalar is held with shape [1] (module docstring)."""
        self._initial[name] = np.array(value)
        self._vars[name] = tf.Variable(np.reshape(value, [1]) if np.ndim(value) == 0 else value, name=name,
                                       trainable=False)

    def _is_scalar(self, name: str) -> bool:
        """A scalar of the contract, held with shape [1] (``_add_var``)."""
        return self._initial[name].ndim == 0

    def _read_state(self, name: str):
        """A state variable's value in its contract shape (scalars as rank 0)."""
        value = tf.identity(self._vars[name])
        return tf.reshape(value, []) if self._is_scalar(name) else value

    def _write_state(self, name: str, value) -> None:
        """Assigns a state variable from a value in its contract shape."""
        var = self._vars[name]
        var.assign(tf.reshape(tf.cast(value, var.dtype), [1]) if self._is_scalar(name) else value)

    @property
    def lowest_episode_cut(self) -> CachedCut | None:
        """The cached cut at the lowest candidate, when it has the episode signatures: the cut a selection
        that reaches the lowest candidate steps from (the self-test's and the parity tests'); else None."""
        if self.accumulates and self.cache_cuts[0].index == self.candidates[0]:
            return self.cache_cuts[0]
        return None

    @property
    def initial_state(self) -> dict[str, np.ndarray]:
        """The exported initial state (what ``reset_state`` restores)."""
        return {n: v.copy() for n, v in self._initial.items()}

    def _head(self, emb):
        """Returns logits and the pieces the backward needs (``converters.cosine_head``)."""
        return head_logits(self.config, emb, self._vars[C.PROTOTYPES], self._vars[C.NUM_CLASSES])

    # --------------------------------------------------------------- signatures
    def _build_functions(self) -> None:
        h, w, c = self.graph.input_spec.shape
        images = tf.TensorSpec([None, h, w, c], tf.float32, name=C.IMAGES)
        labels = tf.TensorSpec([None], tf.int32, name=C.LABELS)
        dummy = tf.TensorSpec([], tf.int32, name=C.DUMMY)  # every signature takes an input (CONTRACT.md)
        support_mask = tf.TensorSpec([None], tf.float32, name=C.SUPPORT_MASK)
        k, d = self.config.class_capacity, self.feature_dim

        @signature(input_signature=[images])
        def infer(images):
            emb, _ = self._forward(images)
            logits, _ = self._head(emb)
            return {C.EMBEDDINGS: emb, C.LOGITS: logits}

        @signature(input_signature=[images, labels])
        def fisher(images, labels):
            _, _, deltas = self._backward(images, labels, "fisher")
            return {name: deltas[name] for name in self.candidate_names}

        @signature(input_signature=[images, labels])
        def train_step(images, labels):
            self._vars[C.STEP].assign_add([1.0])
            loss, accuracy, _ = self._backward(images, labels, "train")
            return {C.LOSS: loss, C.ACCURACY: accuracy}

        @signature(input_signature=[tf.TensorSpec([k, d], tf.float32, name=C.PROTOTYPES),
                                      tf.TensorSpec([], tf.int32, name=C.NUM_CLASSES)])
        def set_head(prototypes, num_classes):
            self._vars[C.PROTOTYPES].assign(prototypes)
            self._write_state(C.NUM_CLASSES, num_classes)
            return {C.OK: tf.constant(1, tf.int32)}

        @signature(input_signature=[tf.TensorSpec([sum(self.mask_sizes)], tf.float32, name=C.CHANNEL_MASK)])
        def set_selection(channel_mask):
            parts = tf.split(channel_mask, self.mask_sizes)
            for name, part in zip(self.candidate_names, parts):
                self._vars[name + C.MASK_SUFFIX].assign(part)
            self._clear_accumulators()
            return {C.OK: tf.constant(1, tf.int32)}

        @signature(input_signature=[tf.TensorSpec([], tf.float32, name=C.LEARNING_RATE)])
        def set_hparams(learning_rate):
            self._write_state(C.LEARNING_RATE, learning_rate)
            return {C.OK: tf.constant(1, tf.int32)}

        @signature(input_signature=[dummy])
        def get_state(dummy):  # noqa: ARG001 - the contract's dummy input
            return {n: self._read_state(n) for n in self.names}

        specs = [tf.TensorSpec(self._initial[n].shape, self._initial[n].dtype, name=n) for n in self.names]

        @signature(input_signature=specs)
        def set_state(*values):
            given = dict(zip(self.names, values))
            for n, value in given.items():
                self._write_state(n, value)
            for name in self.candidate_names:
                differs = self._exported_differs(name, given[name + C.KERNEL_SUFFIX], given[name + C.BIAS_SUFFIX])
                self._dirty[name].assign(tf.reshape(tf.cast(differs, tf.float32), [1]))
            self._clear_accumulators()
            return {C.OK: tf.constant(1, tf.int32)}

        @signature(input_signature=[dummy])
        def reset_state(dummy):  # noqa: ARG001 - the contract's dummy input
            for n in self.names:
                self._write_state(n, tf.constant(self._initial[n]))
            for name in self.candidate_names:
                self._dirty[name].assign(tf.zeros([1], tf.float32))
            self._clear_accumulators()
            return {C.OK: tf.constant(1, tf.int32)}

        def variant(cut: int):
            @signature(input_signature=[images, labels])
            def train_step_cut(images, labels):
                self._vars[C.STEP].assign_add([1.0])
                loss, accuracy, _ = self._backward(images, labels, "train", cut=cut)
                return {C.LOSS: loss, C.ACCURACY: accuracy}
            return train_step_cut

        def cached(cut: CachedCut) -> dict:
            activations = tf.TensorSpec([None, *cut.shape], tf.float32, name=C.ACTIVATIONS)

            @signature(input_signature=[images])
            def features(images):
                value, _ = self._forward(images, stop=cut.frontier)
                return {C.ACTIVATIONS: value}

            @signature(input_signature=[activations, labels])
            def train_step_from(activations, labels):
                self._vars[C.STEP].assign_add([1.0])
                loss, accuracy, _ = self._backward(activations, labels, "train", cut=cut.index, start=cut)
                return {C.LOSS: loss, C.ACCURACY: accuracy}

            @signature(input_signature=[activations])
            def infer_from(activations):
                emb, _ = self._forward(activations, start=cut)
                logits, _ = self._head(emb)
                return {C.EMBEDDINGS: emb, C.LOGITS: logits}

            out = {C.features_name(cut.layer): features, C.train_from_name(cut.layer): train_step_from,
                   C.infer_from_name(cut.layer): infer_from}
            if not self.accumulates:
                return out

            @signature(input_signature=[activations, labels, support_mask])
            def episode_step_from(activations, labels, support_mask):
                self._vars[C.STEP].assign_add([1.0])
                loss, accuracy, _ = self._backward(activations, labels, "train", cut=cut.index, start=cut,
                                                   support=support_mask)
                return {C.LOSS: loss, C.ACCURACY: accuracy}

            @signature(input_signature=[activations, labels])
            def accumulate_from(activations, labels):
                loss, accuracy, _ = self._backward(activations, labels, "accumulate", cut=cut.index, start=cut)
                self._count_rows(labels)
                return {C.LOSS: loss, C.ACCURACY: accuracy}

            return {**out, C.episode_from_name(cut.layer): episode_step_from,
                    C.accumulate_from_name(cut.layer): accumulate_from}

        @signature(input_signature=[dummy])
        def apply_accumulated(dummy):  # noqa: ARG001 - the contract's dummy input
            self._apply_accumulated()
            return {C.OK: tf.constant(1, tf.int32)}

        self.train_variants = {train_variant_name(self.table, cut): variant(cut) for cut in self.variant_cuts}
        self.cache_functions = {name: fn for cut in self.cache_cuts for name, fn in cached(cut).items()}
        if self.accumulates:
            self.cache_functions[C.APPLY_ACCUMULATED] = apply_accumulated
        self.infer, self.fisher, self.train_step = infer, fisher, train_step
        self.set_head, self.set_selection, self.set_hparams = set_head, set_selection, set_hparams
        self.get_state, self.set_state, self.reset_state = get_state, set_state, reset_state

    def signatures(self) -> dict:
        """Signature name -> concrete function, for ``tf.saved_model.save``."""
        out = {
            name: getattr(self, name).get_concrete_function()
            for name in C.SIGNATURE_NAMES
        }
        extra = {**self.train_variants, **self.cache_functions}
        return {**out, **{name: fn.get_concrete_function() for name, fn in extra.items()}}
