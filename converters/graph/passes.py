"""Pure rewrites of the graph IR: input preprocessing, the embedding, pruning, BN folding, fusion.

Order (``prepare_graph``): absorb the input's Rescaling/Normalization into the input spec -> pick
the embedding (``select_embedding``: any global pooling or Flatten, else the input of the final Dense
layers; the user's classifier head above it is dropped) -> prune what the embedding does not read ->
drop inference identities (Dropout) -> fold BatchNorm into the preceding conv/dense -> fuse each
weighted layer with the activation that alone reads it.

BN folding: a BatchNormalization affine y = s * z + t after z = conv(x, W) + b, where the conv output is read by the
affine alone, becomes the conv with W'[..., o] = s_o W[..., o] (the kind's output-channel axis in the
op registry: 3 for conv [kh, kw, C_in, C_out], 2 for depthwise [kh, kw, C, 1], 1 for dense [D_in, D_out]) and
b'_o = s_o b_o + t_o. An affine after anything else, and any other affine (a LayerScale), stays (a per-channel
op with a gradient).
"""

from __future__ import annotations

import numpy as np

from tflite_train.converters.graph.ir import ACTIVATIONS, FeatureLayer, Graph, InputSpec, Node
from tflite_train.converters.ops import registry


class EmbeddingError(ValueError):
    """The embedding cannot be found or has an unusable shape."""


def _rewire(nodes: list[Node], removed: str, replacement: str) -> list[Node]:
    """Drops node ``removed`` and makes its readers read ``replacement``."""
    out = []
    for node in nodes:
        if node.name == removed:
            continue
        if removed in node.inputs:
            node = node.replace(inputs=tuple(replacement if i == removed else i for i in node.inputs))
        out.append(node)
    return out


def _consumers(nodes: list[Node]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {n.name: [] for n in nodes}
    for node in nodes:
        for i in node.inputs:
            out[i].append(node.name)
    return out


def absorb_preprocessing(nodes: list[Node], spec: InputSpec) -> tuple[list[Node], InputSpec]:
    """Folds the chain of Rescaling/Normalization right after the input (inference identities such as data
    augmentation between them dropped) into the input spec.

    The chain computes x = a r + b per channel from raw pixels r; the exported graph computes
    (r - mean) / std, so mean = -b / a and std = 1 / a, and the device feeds raw pixels in [0, 255].
    """
    a = np.ones(spec.shape[2], np.float64)
    b = np.zeros(spec.shape[2], np.float64)
    absorbed = []
    image = nodes[0].name
    while True:
        readers = _consumers(nodes)[image]
        if len(readers) != 1:
            break
        node = next(n for n in nodes if n.name == readers[0])
        if registry.is_inference_identity(node):  # e.g. RandomFlip before the Rescaling: nothing at inference
            nodes = _rewire(nodes, node.name, image)
            continue
        if not node.attrs.get("preprocessing"):  # the affine of a Rescaling/Normalization (its rule's flag)
            break
        scale, shift = (w.astype(np.float64) for w in node.weights)
        a, b = a * scale, b * scale + shift
        absorbed.append(node.name)
        nodes = _rewire(nodes, node.name, image)
    if not absorbed:
        return nodes, spec
    if np.any(a == 0):
        raise EmbeddingError(f"input preprocessing {absorbed} multiplies a channel by 0")
    mean = tuple(float(v) for v in -b / a)
    std = tuple(float(v) for v in 1.0 / a)
    return nodes, InputSpec(spec.shape, (0.0, 255.0), mean, std, source="+".join(absorbed))


def _dominators(nodes: list[Node], target: str) -> set[str]:
    """Nodes every path from the input to ``target`` passes through (``target`` included)."""
    dom: dict[str, set[str]] = {}
    for node in nodes:
        if not node.inputs:
            dom[node.name] = {node.name}
        else:
            dom[node.name] = set.intersection(*(dom[i] for i in node.inputs)) | {node.name}
    return dom[target]


FEATURE_LAYER_RULE = "--feature-layer"
DENSE_CHAIN_RULE = "the input of the classifier's Dense layers"
OUTPUT_RULE = "the model's output (no classifier found)"


def _dense_chain_input(by_name: dict[str, Node], output: str) -> str | None:
    """The input of the lowest Dense of the chain of head layers (``registry.is_head_part``: Dense, activations,
    identities, affines; or a frozen layer that keeps its input's vector shape, e.g. softmax) that ends at
    ``output``; None when the chain holds no Dense."""
    node, lowest = by_name[output], None
    while len(node.inputs) == 1:
        source = by_name[node.inputs[0]]
        elementwise = registry.is_opaque(node) and len(node.shape) == 1 and node.shape == source.shape
        if not registry.is_head_part(node) and not elementwise:
            break
        if node.is_weighted:  # the head's weighted kind: a Dense
            lowest = node
        node = source
    return None if lowest is None else lowest.inputs[0]


def select_embedding(nodes: list[Node], output: str,
                     feature_layer: str | None) -> tuple[list[Node], str, FeatureLayer]:
    """The embedding node [N, D] and the layer it comes from: ``feature_layer`` if given, else the first global
    pooling (average or max, keepdims or not) or Flatten that every path to the model's output passes through,
    else the input of the Dense layers (with their activations, dropout, batch normalisation) that end the
    model, else the model's output. The user's classifier after it is dropped. A 4-D embedding gets a
    global average pooling appended, a [1, 1, D] one a reshape.

    Raises:
      EmbeddingError: an unknown ``feature_layer`` or an embedding of unusable rank.
    """
    by_name = {n.name: n for n in nodes}
    if feature_layer is not None:
        if feature_layer not in by_name:
            raise EmbeddingError(f"--feature-layer {feature_layer!r} is not a layer of the model")
        chosen, rule = feature_layer, FEATURE_LAYER_RULE
    else:
        dominators = _dominators(nodes, output)
        pools = [n for n in nodes if n.name in dominators and registry.embedding_rule(n)]
        chain = _dense_chain_input(by_name, output)
        if pools:
            chosen, rule = pools[0].name, registry.embedding_rule(pools[0])
        elif chain is not None:
            chosen, rule = chain, DENSE_CHAIN_RULE
        else:
            chosen, rule = output, OUTPUT_RULE
    node = by_name[chosen]
    feature = FeatureLayer(chosen, rule)
    if len(node.shape) == 1:
        return list(nodes), chosen, feature
    if len(node.shape) != 3:
        raise EmbeddingError(f"the embedding {chosen!r} has shape {node.shape}; it must be [D] or [H, W, D]")
    op, keras_class, attrs = registry.embedding_reduction(node.shape)
    extra = Node(f"{chosen}_embedding", op, (chosen,), (node.shape[2],), attrs=attrs, keras_class=keras_class)
    return [*nodes, extra], extra.name, feature


def prune(nodes: list[Node], output: str) -> list[Node]:
    """Only the nodes ``output`` reads (transitively)."""
    needed = {output}
    for node in reversed(nodes):
        if node.name in needed:
            needed.update(node.inputs)
    return [n for n in nodes if n.name in needed]


def drop_identities(nodes: list[Node], output: str) -> tuple[list[Node], str]:
    """Removes inference identities (Dropout, linear Activation)."""
    for node in [n for n in nodes if registry.is_inference_identity(n)]:
        nodes = _rewire(nodes, node.name, node.inputs[0])
        if output == node.name:
            output = node.inputs[0]
    return nodes, output


def fold_batchnorm(nodes: list[Node], output: str) -> tuple[list[Node], str]:
    """Folds every BatchNormalization affine that alone reads a linear weighted node into it (module docstring;
    a LayerScale or preprocessing affine stays)."""
    changed = True
    while changed:
        changed = False
        readers = _consumers(nodes)
        by_name = {n.name: n for n in nodes}
        for node in nodes:
            if not registry.folds_into_weighted(node):
                continue
            src = by_name[node.inputs[0]]
            if not src.is_weighted or src.attrs.get("activation", "linear") != "linear" or readers[src.name] != [node.name]:
                continue
            scale, shift = node.weights
            kernel, bias = src.weights
            shape = [1] * kernel.ndim
            shape[registry.weighted_kind(src.op).out_axis] = -1
            folded = src.replace(weights=((kernel * scale.reshape(shape)).astype(np.float32),
                                          (bias * scale + shift).astype(np.float32)),
                                 attrs={**src.attrs, "keras_output": node.name})
            nodes = [folded if n.name == src.name else n for n in nodes]
            nodes = _rewire(nodes, node.name, src.name)
            if output == node.name:
                output = src.name
            changed = True
            break
    return nodes, output


def fuse_activations(nodes: list[Node], output: str) -> tuple[list[Node], str]:
    """Moves an activation of ``ACTIVATIONS`` into the weighted node it alone reads (the layer's y = f(z))."""
    for name in [n.name for n in nodes if registry.is_fusable_activation(n)]:
        by_name = {n.name: n for n in nodes}
        node = by_name[name]
        src = by_name[node.inputs[0]]
        if not src.is_weighted or src.attrs.get("activation", "linear") != "linear" or \
                node.attrs["fn"] not in ACTIVATIONS or _consumers(nodes)[src.name] != [node.name]:
            continue  # GELU (activations.NODE_ACTIVATIONS) stays a node: the layer table has no such activation
        fused = src.replace(attrs={**src.attrs, "activation": node.attrs["fn"], "alpha": node.attrs.get("alpha", 0.0),
                                   "keras_output": node.attrs.get("keras_output", node.name)})
        nodes = _rewire([fused if n.name == src.name else n for n in nodes], node.name, src.name)
        if output == node.name:
            output = src.name
    return nodes, output


def prepare_graph(nodes: list[Node], output: str, spec: InputSpec, feature_layer: str | None = None) -> Graph:
    """All passes, in the module docstring's order."""
    nodes, spec = absorb_preprocessing(nodes, spec)
    nodes, output, feature = select_embedding(nodes, output, feature_layer)
    nodes = prune(nodes, output)
    nodes, output = drop_identities(nodes, output)
    nodes, output = fold_batchnorm(nodes, output)
    nodes, output = fuse_activations(nodes, output)
    return Graph(tuple(nodes), output, spec, feature)
