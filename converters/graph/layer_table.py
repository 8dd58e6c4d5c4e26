"""The layer table (``tflite_train.sparse.LayerTable``) of a graph, with blocks found from its structure.

Layers are the weighted nodes in topological order. Blocks (for ``--candidates blocks:K``):

* the first layer is the stem (block -1, role "stem");
* a block ends at a layer with a linear activation whose output feeds (through per-channel affines, e.g.
  ConvNeXt's LayerScale) another layer, a residual
  ``add`` or the embedding (the linear bottleneck of inverted-residual nets; a squeeze-excite conv,
  whose output feeds a gate, does not end a block, nor does the depthwise half of a SeparableConv2D);
* layers after the last block end form the trailing group: block ``num_blocks``, role "final";
* inside a block: a channel-wise layer "depthwise", the block's last layer "project", a 1x1 conv (groups 1)
  before the block's depthwise "expand", any other its kind's role ("conv" or "dense"; the op registry's
  ``WeightedKind.role``).

On the built-in backbones this reproduces ``tflite_train.architectures.build_layer_table`` exactly.
A graph without linear bottlenecks (a plain CNN) has no blocks: candidates are then given on layers.
"""

from __future__ import annotations

from tflite_train.converters.graph.ir import Graph, Node
from tflite_train.converters.ops import registry
from tflite_train.sparse.layer_table import LayerSpec, LayerTable


def _ends_block(node: Node, graph: Graph, readers: dict[str, list[str]]) -> bool:
    if node.attrs.get("activation", "linear") != "linear" or node.attrs.get("separable"):
        return False  # the depthwise half of a SeparableConv2D is linear but no bottleneck
    by_name = graph.by_name
    if node.name == graph.output:
        return True
    outs = readers[node.name]
    while len(outs) == 1 and registry.is_channel_scale(by_name[outs[0]]) and outs[0] != graph.output:
        outs = readers[outs[0]]  # a per-channel scale between the projection and the add (ConvNeXt's LayerScale)
    return bool(outs) and all(by_name[r].is_weighted or registry.is_residual_join(by_name[r]) or r == graph.output
                              for r in outs)


def _spatial(shape: tuple[int, ...]) -> tuple[int, int]:
    return (shape[0], shape[1]) if len(shape) == 3 else (1, 1)


def graph_layer_table(graph: Graph) -> LayerTable:
    """The table of ``graph``'s weighted layers (module docstring).

    Raises:
      ValueError: a graph without weighted layers.
    """
    weighted = graph.weighted()
    if not weighted:
        raise ValueError("the model has no Conv2D, DepthwiseConv2D or Dense layer to train")
    readers = graph.consumers()
    by_name = graph.by_name
    blocks: list[list[Node]] = [[]]
    for node in weighted[1:]:
        blocks[-1].append(node)
        if _ends_block(node, graph, readers):
            blocks.append([])
    trailing = blocks.pop()
    layers: list[LayerSpec] = []

    def geometry(node: Node) -> tuple[int, int, int]:
        return registry.weighted_kind(node.op).geometry(node, by_name[node.inputs[0]].shape)

    def add(node: Node, block: int, role: str) -> None:
        in_shape = by_name[node.inputs[0]].shape
        kernel, stride, groups = geometry(node)
        cin, cout = in_shape[-1], node.shape[-1]
        layers.append(LayerSpec(len(layers), node.name, block, role, int(kernel), int(stride), int(cin), int(cout),
                                int(groups), _spatial(in_shape), _spatial(node.shape),
                                node.attrs.get("activation", "linear")))

    add(weighted[0], -1, "stem")
    for b, members in enumerate(blocks):
        kinds = [registry.weighted_kind(n.op) for n in members]
        dw = next((k for k, kind in enumerate(kinds) if kind.channelwise), None)
        for k, (node, kind) in enumerate(zip(members, kinds)):
            if kind.channelwise:
                role = "depthwise"
            elif k == len(members) - 1:
                role = "project"
            elif k == 0 and dw is not None and kind.role == "conv" and geometry(node)[::2] == (1, 1):
                role = "expand"  # a 1x1 conv with groups 1
            else:
                role = kind.role
            add(node, b, role)
    for node in trailing:
        add(node, len(blocks), "final")
    return LayerTable(tuple(layers))
