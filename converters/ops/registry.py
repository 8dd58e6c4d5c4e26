"""The op registry: every op family's IR kinds and Keras layer rules in one table.

The graph reader (``converters.graph.keras_reader``) asks it how a Keras layer or functional op maps to
IR nodes (:func:`read_layer`, :func:`read_operation`) and why a layer runs frozen (:func:`frozen_settings`);
the IR (``converters.graph.ir``), the passes and the layer table ask it which kinds are weighted or
differentiable, how a weighted kind lays out its kernel and which layer-table role it has
(:func:`weighted_kind`), and what a node is to them (the predicates below: an inference identity, a
fusable activation, a per-channel scale, a residual join, a part of the classifier head, a
BatchNormalization to fold, a possible embedding); the dispatcher (``converters.ops.dispatch``) and the
backward pass ask it for forward and gradient (:func:`kind`). Nothing outside ``converters/ops/`` compares
an IR kind or a Keras class name (``tests/converters/test_op_dispatch_spelling.py``). Adding an op family
is one module declaring a ``FAMILY`` (``converters.ops.spec``) plus its line in :data:`FAMILIES`.

Two IR kinds belong to no family: :data:`INPUT` (the image) and :data:`OPAQUE` (any other Keras layer, run
frozen through Keras itself; refused in the gradient region with :func:`gradient_refusal`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tflite_train.converters.ops import (activations, concat, conv, elementwise, grouped_conv, normalization, pooling,
                                         shape_ops)
from tflite_train.converters.ops.spec import LayerRule, OperationRule, OpFamily, OpKind, ReadContext, WeightedKind

if TYPE_CHECKING:
    from tflite_train.converters.graph.ir import Node

FAMILIES: tuple[OpFamily, ...] = (conv.FAMILY, grouped_conv.FAMILY, activations.FAMILY, elementwise.FAMILY,
                                  normalization.FAMILY, concat.FAMILY, pooling.FAMILY, shape_ops.FAMILY)
INPUT = "input"
"""The IR kind of the image input."""
OPAQUE = "opaque"
"""The IR kind of a Keras layer the registry does not map: it runs frozen, through Keras itself."""
STRUCTURAL_KINDS = (INPUT, OPAQUE)
"""IR kinds of no family: the image input and a frozen-only Keras layer."""


def _index(items, key, what: str) -> dict:
    out = {}
    for item in items:
        name = key(item)
        if name in out:
            raise ValueError(f"op registry: {what} {name!r} is declared twice")
        out[name] = item
    return out


KINDS: dict[str, OpKind | WeightedKind] = _index([k for f in FAMILIES for k in f.kinds], lambda k: k.name, "IR kind")
LAYER_RULES: tuple[LayerRule, ...] = tuple(r for f in FAMILIES for r in f.layers)
LAYERS: dict[str, tuple[LayerRule, ...]] = {
    cls: tuple(r for r in LAYER_RULES if r.keras_class == cls) for cls in dict.fromkeys(r.keras_class
                                                                                      for r in LAYER_RULES)}
"""Keras layer class -> its rules, tried in order (e.g. Conv2D: groups 1, then grouped)."""
OPERATIONS: dict[str, OperationRule] = _index([r for f in FAMILIES for r in f.operations], lambda r: r.keras_class,
                                              "operation")
WEIGHTED_KINDS: tuple[str, ...] = tuple(k for k, v in KINDS.items() if isinstance(v, WeightedKind))
DIFFERENTIABLE_KINDS: tuple[str, ...] = WEIGHTED_KINDS + tuple(k for k in KINDS if k not in WEIGHTED_KINDS)
FAMILY_OF: dict[str, str] = {k.name: f.name for f in FAMILIES for k in f.kinds}


def _check_rules() -> None:
    known = set(KINDS) | set(STRUCTURAL_KINDS)
    for rule in [*LAYER_RULES, *OPERATIONS.values()]:
        unknown = [k for k in rule.kinds if k not in known]
        if unknown:
            raise ValueError(f"op registry: {rule.keras_class} maps to unknown IR kinds {unknown}")


_check_rules()


def kind(name: str) -> OpKind | WeightedKind:
    """The registered IR kind ``name``.

    Raises:
      ValueError: no family declares it (``input``, ``opaque`` or a typo).
    """
    if name not in KINDS:
        raise ValueError(f"IR kind {name!r} has no forward/gradient in the op registry")
    return KINDS[name]


def weighted_kind(name: str) -> WeightedKind:
    """The weighted IR kind ``name`` (conv2d, depthwise, dense).

    Raises:
      ValueError: ``name`` is not a weighted kind.
    """
    spec = kind(name)
    if not isinstance(spec, WeightedKind):
        raise ValueError(f"IR kind {name!r} has no weights")
    return spec


def gradient_refusal(node: "Node") -> str:
    """The one-line refusal of a node without an on-device gradient, naming its Keras layer and class."""
    return f"layer {node.name!r} ({node.keras_class or node.op}) has no on-device gradient"


def require_gradient(node: "Node") -> OpKind | WeightedKind:
    """The kind of ``node`` when it has a gradient.

    Raises:
      ValueError: :func:`gradient_refusal` (an opaque node: a Keras layer the registry does not map).
    """
    if node.op not in KINDS:
        raise ValueError(gradient_refusal(node))
    return KINDS[node.op]


def is_opaque(node: "Node") -> bool:
    """True for a Keras layer the registry does not map (it runs frozen, through Keras itself)."""
    return node.op == OPAQUE


def _kind_of(node: "Node") -> OpKind | WeightedKind | None:
    return KINDS.get(node.op)


def is_inference_identity(node: "Node") -> bool:
    """True for y = x at inference (Dropout, data augmentation: ``OpKind.inference_identity``)."""
    spec = _kind_of(node)
    return isinstance(spec, OpKind) and spec.inference_identity


def is_fusable_activation(node: "Node") -> bool:
    """True for an activation node the passes may fuse into the weighted node it reads
    (``OpKind.fusable_activation``)."""
    spec = _kind_of(node)
    return isinstance(spec, OpKind) and spec.fusable_activation


def is_channel_scale(node: "Node") -> bool:
    """True for a per-channel y = x s + t (``OpKind.channel_scale``)."""
    spec = _kind_of(node)
    return isinstance(spec, OpKind) and spec.channel_scale


def is_residual_join(node: "Node") -> bool:
    """True for a node that sums branches (``OpKind.residual_join``)."""
    spec = _kind_of(node)
    return isinstance(spec, OpKind) and spec.residual_join


def is_head_part(node: "Node") -> bool:
    """True for a node that may be part of the classifier head above the embedding (``head`` of its kind)."""
    spec = _kind_of(node)
    return spec is not None and spec.head


def node_rule(node: "Node") -> LayerRule | None:
    """The Keras layer rule that made ``node`` (its Keras class's rule that emits the node's kind), or None
    (a functional op's or a structural node, an activation split off a layer)."""
    return next((r for r in LAYERS.get(node.keras_class, ()) if node.op in r.kinds), None)


def embedding_rule(node: "Node") -> str:
    """The rule's name when ``node`` can be the embedding (a global pooling or Flatten: ``LayerRule.embedding``),
    else ""."""
    rule = node_rule(node)
    return "" if rule is None else rule.embedding


def folds_into_weighted(node: "Node") -> bool:
    """True for a node the passes fold into the linear weighted node it alone reads (a BatchNormalization:
    ``LayerRule.folds``)."""
    rule = node_rule(node)
    return rule is not None and rule.folds


def embedding_reduction(shape: tuple[int, ...]) -> tuple[str, str, dict]:
    """(IR kind, Keras class, attrs) of the node that turns an [H, W, D] embedding into [D]: a Flatten of a
    [1, 1, D] map, else a global average pooling."""
    if tuple(shape[:2]) == (1, 1):
        return "reshape", "Flatten", {}
    return "global_pool", "GlobalAveragePooling2D", {"keepdims": False}


def frozen_settings(layer) -> list[str]:
    """The settings of Keras ``layer`` that keep its class's rules from reading it (``LayerRule.frozen_settings``,
    e.g. ``["groups=4"]``); empty when its rules say nothing."""
    for rule in LAYERS.get(type(layer).__name__, ()):
        if rule.frozen_settings is not None:
            return rule.frozen_settings(layer)
    return []


def layer_rules(keras_class: str) -> tuple[LayerRule, ...]:
    """The rules of a Keras layer class; none: the layer only runs frozen."""
    return LAYERS.get(keras_class, ())


def read_layer(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """The IR output of Keras ``layer`` read through its rule, or None when it only runs frozen (no rule,
    a variant without a gradient, channels-first data)."""
    if getattr(layer, "data_format", "channels_last") not in ("channels_last", None):
        return None
    for rule in LAYERS.get(type(layer).__name__, ()):
        out = rule.read(ctx, layer, inputs, shapes)
        if out is not None:
            return out
    return None


def read_operation(ctx: ReadContext, op, inputs: list[str], shapes, node) -> str | None:
    """The IR output of a functional Keras op (``x + 3.0``) through its rule, or None (runs frozen)."""
    rule = OPERATIONS.get(type(op).__name__)
    return None if rule is None or node is None else rule.read(ctx, op, inputs, shapes, node)


def _is_trainable(rule: LayerRule) -> bool:
    return any(k in WEIGHTED_KINDS for k in rule.kinds)


def trainable_layers() -> tuple[str, ...]:
    """Keras layer classes read as weighted kinds: candidates, their weights updated on the device."""
    return tuple(dict.fromkeys(r.keras_class for r in LAYER_RULES if _is_trainable(r)))


def differentiable_layers() -> tuple[str, ...]:
    """Keras layer classes without trainable weights that have a gradient (may lie above candidates)."""
    return tuple(dict.fromkeys(r.keras_class for r in LAYER_RULES if not _is_trainable(r)))


README_BEGIN = "<!-- op-registry: generated by converters.ops.registry.readme_section(); do not edit -->"
README_END = "<!-- /op-registry -->"


def _bullets(trainable: bool) -> list[str]:
    """One bullet per set of layer rules sharing a family and a ``supports`` text, in declaration order."""
    groups: dict[tuple[str, str], list[str]] = {}
    for family in FAMILIES:
        for rule in family.layers:
            if _is_trainable(rule) == trainable:
                groups.setdefault((family.name, rule.supports), []).append(rule.keras_class)
    lines = []
    for (_, supports), members in groups.items():
        names = ", ".join(f"`{c}`" for c in members)
        lines.append(f"- {names}: {supports}" if supports else f"- {names}")
    return lines


def readme_section() -> str:
    """The README's list of what is trainable, what has a gradient and what only runs frozen (between
    :data:`README_BEGIN` and :data:`README_END`)."""
    spellings = dict.fromkeys(e.strip() for r in OPERATIONS.values() for e in r.supports.split(",") if e.strip())
    operations = ", ".join(f"`{e}`" for e in spellings)
    lines = [README_BEGIN, "", "**Trainable** (can be candidates: their weights are updated on the device):", ""]
    lines += _bullets(True)
    lines += ["", "**With a gradient** (may lie anywhere between the candidates and the embedding):", ""]
    lines += _bullets(False)
    lines += [f"- functional ops: {operations}", ""]
    lines += ["**Only run frozen** (below the deepest candidate): every other layer, and every variant not "
              "listed above, that TFLite converts to builtin ops.", "", README_END]
    return "\n".join(lines)
