"""The ONNX twin of an exported model, for the ONNX Runtime training peer (``bench.peer_ort``).

Built with ``onnx.helper`` from the same BN-folded Keras model as the TFLite export (walking its
functional graph: Conv2D, DepthwiseConv2D, ReLU / ReLU6, Add, GlobalAveragePooling2D), with the
project's input normalisation and cosine head:

* input ``images`` f32[N, H, W, C] (NHWC like the TFLite file) -> (x - mean) / std -> NCHW;
* Conv2D: ONNX Conv with W[o, i, kh, kw] = K[kh, kw, i, o] and explicit pads equal to TF "same":
  pad_total = max((out - 1) s + k - in, 0), before = pad_total // 2, after = the rest (asymmetric
  at stride 2 on even inputs);
* DepthwiseConv2D (multiplier 1): Conv with group = C, W[c, 0, kh, kw] = K[kh, kw, c, 0];
* ReLU6 = Clip(0, 6); Add = Add; global average pooling = GlobalAveragePool + Flatten -> ``embeddings``;
* head (``converters.cosine_head`` ``head_logits`` for the K valid classes):
  logits_c = s cos(e, p_c) = s <e r, p_c / |p_c|>, r = (|e|^2 + eps)^-1/2 -> ``logits`` f32[N, K];
  the prototypes are constants (not trained, as in the project's ``train_step``).

Parameters are named ``<layer>.weight`` and ``<layer>.bias`` (``parameter_names``), so training
artifacts can mark whole layers trainable.

``graph_to_onnx`` builds the same from the exporter's own graph IR (``converters.graph``: BN already
folded, activations fused, the input normalisation absorbed into ``InputSpec``), for user Keras
models such as EfficientNet-Lite0 that are not built from a backbone config.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tflite_train import contract as C

NORM_EPS = 1e-12
OPSET = 17
IR_VERSION = 9


def same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """(before, after) of TF "same" padding along one axis."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def parameter_names(layer: str) -> tuple[str, str]:
    """The ONNX initializer names of a layer's kernel and bias."""
    return f"{layer}.weight", f"{layer}.bias"


def keras_to_onnx(model, mean: Sequence[float], std: Sequence[float], prototypes: np.ndarray,
                  cosine_scale: float, with_embeddings: bool = True):
    """The ONNX ModelProto of a BN-folded Keras backbone plus the cosine head.

    Args:
      model: Functional Keras model, NHWC images -> embeddings (``folded_backbone(...).model``).
      mean, std: Per-channel input normalisation of the export.
      prototypes: f32[K, D] class prototypes (the K valid classes).
      cosine_scale: s of the head.
      with_embeddings: Also output ``embeddings`` (inference); the training graph outputs ``logits`` only.

    Raises:
      ValueError: a layer this builder does not translate (named with its class).
    """
    from onnx import helper, numpy_helper

    nodes, inits = [], []
    names: dict[str, str] = {}  # keras layer name -> onnx tensor name of its output

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    h, w, c = (int(d) for d in model.input_shape[1:])
    inp = model.layers[0].name
    const("norm.mean", np.asarray(mean, np.float32).reshape(1, 1, 1, c))
    const("norm.inv_std", (1.0 / np.asarray(std, np.float32)).reshape(1, 1, 1, c))
    nodes += [helper.make_node("Sub", ["images", "norm.mean"], ["norm.centered"]),
              helper.make_node("Mul", ["norm.centered", "norm.inv_std"], ["norm.out"]),
              helper.make_node("Transpose", ["norm.out"], [inp], perm=[0, 3, 1, 2])]
    names[inp] = inp
    feature = None
    for layer in model.layers[1:]:
        kind = type(layer).__name__
        sources = [names[t._keras_history[0].name] for t in _inputs(layer)]
        out = layer.name
        if kind in ("Conv2D", "DepthwiseConv2D"):
            kernel, bias = layer.get_weights()
            if layer.padding != "same" or layer.dilation_rate != (1, 1) or getattr(layer, "activation").__name__ != "linear":
                raise ValueError(f"layer {layer.name!r} ({kind}): only 'same' padding, no dilation, linear activation")
            in_h, in_w = (int(d) for d in layer.input.shape[1:3])
            k, s = int(kernel.shape[0]), int(layer.strides[0])
            (pt, pb), (pl, pr) = same_pads(in_h, k, s), same_pads(in_w, int(kernel.shape[1]), int(layer.strides[1]))
            if kind == "DepthwiseConv2D":
                if kernel.shape[3] != 1:
                    raise ValueError(f"layer {layer.name!r} (DepthwiseConv2D): depth multiplier must be 1")
                weight, group = kernel.transpose(2, 3, 0, 1), int(kernel.shape[2])
            else:
                weight, group = kernel.transpose(3, 2, 0, 1), 1
            wn, bn = parameter_names(layer.name)
            const(wn, weight.astype(np.float32))
            const(bn, bias.astype(np.float32))
            nodes.append(helper.make_node("Conv", [sources[0], wn, bn], [out], group=group,
                                          kernel_shape=list(kernel.shape[:2]), strides=list(layer.strides),
                                          pads=[pt, pl, pb, pr]))
        elif kind == "ReLU":
            cfg = layer.get_config()
            if cfg.get("negative_slope") or cfg.get("threshold"):
                raise ValueError(f"layer {layer.name!r} (ReLU): leaky/thresholded ReLU not translated")
            if cfg.get("max_value") is None:
                nodes.append(helper.make_node("Relu", sources, [out]))
            else:
                lo = const(f"{out}.min", np.array(0.0, np.float32))
                hi = const(f"{out}.max", np.array(float(cfg["max_value"]), np.float32))
                nodes.append(helper.make_node("Clip", [sources[0], lo, hi], [out]))
        elif kind == "Add":
            nodes.append(helper.make_node("Add", sources, [out]))
        elif kind == "GlobalAveragePooling2D":
            nodes += [helper.make_node("GlobalAveragePool", sources, [f"{out}.pooled"]),
                      helper.make_node("Flatten", [f"{out}.pooled"], [out], axis=1)]
            feature = out
        else:
            raise ValueError(f"layer {layer.name!r} ({kind}) is not translated to ONNX")
        names[layer.name] = out
    if feature is None or names[model.layers[-1].name] != feature:
        raise ValueError("the model must end in GlobalAveragePooling2D (the embedding)")
    return _with_head(nodes, inits, const, feature, prototypes, cosine_scale, with_embeddings, (h, w, c))


def graph_to_onnx(graph, prototypes: np.ndarray, cosine_scale: float, with_embeddings: bool = True):
    """The ONNX ModelProto of an exporter graph IR (``PreparedModel.graph``) plus the cosine head.

    Translates ``input`` (normalised by the graph's ``InputSpec``), ``conv2d`` / ``depthwise`` with
    fused linear / relu / relu6, ``activation`` relu / relu6, ``add``, ``identity`` and a final
    ``global_pool`` (optionally followed by ``reshape`` to [D]).

    Raises:
      ValueError: a node this builder does not translate (named with its op).
    """
    from onnx import helper, numpy_helper

    nodes, inits = [], []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def act(fn: str, src: str, out: str) -> None:
        if fn == "linear":
            nodes.append(helper.make_node("Identity", [src], [out]))
        elif fn == "relu":
            nodes.append(helper.make_node("Relu", [src], [out]))
        elif fn == "relu6":
            nodes.append(helper.make_node("Clip", [src, const(f"{out}.min", np.array(0.0, np.float32)),
                                                   const(f"{out}.max", np.array(6.0, np.float32))], [out]))
        else:
            raise ValueError(f"activation {fn!r} ({out}) is not translated to ONNX")

    spec = graph.input_spec
    h, w, c = spec.shape
    first = graph.nodes[0].name
    const("norm.mean", np.asarray(spec.mean, np.float32).reshape(1, 1, 1, c))
    const("norm.inv_std", (1.0 / np.asarray(spec.std, np.float32)).reshape(1, 1, 1, c))
    nodes += [helper.make_node("Sub", ["images", "norm.mean"], ["norm.centered"]),
              helper.make_node("Mul", ["norm.centered", "norm.inv_std"], ["norm.out"]),
              helper.make_node("Transpose", ["norm.out"], [first], perm=[0, 3, 1, 2])]
    shapes = {n.name: n.shape for n in graph.nodes}
    feature = None
    for node in graph.nodes[1:]:
        a, out, src = node.attrs, node.name, list(node.inputs)
        if node.op in ("conv2d", "depthwise"):
            kernel, bias = node.weights
            if a["padding"] != "same":
                raise ValueError(f"node {out!r} ({node.op}): only 'same' padding")
            in_h, in_w = shapes[src[0]][:2]
            (pt, pb), (pl, pr) = (same_pads(in_h, int(kernel.shape[0]), int(a["strides"][0])),
                                  same_pads(in_w, int(kernel.shape[1]), int(a["strides"][1])))
            if node.op == "depthwise":
                weight, group = kernel.transpose(2, 3, 0, 1), int(kernel.shape[2])
            else:
                weight, group = kernel.transpose(3, 2, 0, 1), 1
            wn, bn = parameter_names(out)
            const(wn, weight.astype(np.float32))
            const(bn, bias.astype(np.float32))
            nodes.append(helper.make_node("Conv", [src[0], wn, bn], [f"{out}.z"], group=group,
                                          kernel_shape=list(kernel.shape[:2]), strides=list(a["strides"]),
                                          pads=[pt, pl, pb, pr]))
            act(a.get("activation", "linear"), f"{out}.z", out)
        elif node.op == "activation":
            act(a["fn"], src[0], out)
        elif node.op == "add":
            nodes.append(helper.make_node("Add", src, [out]))
        elif node.op == "identity" or (node.op == "reshape" and feature == src[0]):
            nodes.append(helper.make_node("Identity", src, [out]))
            feature = out if feature == src[0] else feature
        elif node.op == "global_pool":
            nodes += [helper.make_node("GlobalAveragePool", src, [f"{out}.pooled"]),
                      helper.make_node("Flatten", [f"{out}.pooled"], [out], axis=1)]
            feature = out
        else:
            raise ValueError(f"node {out!r} ({node.op}) is not translated to ONNX")
    if feature != graph.output:
        raise ValueError("the graph must end in global average pooling (the embedding)")
    return _with_head(nodes, inits, const, feature, prototypes, cosine_scale, with_embeddings, (h, w, c))


def _with_head(nodes: list, inits: list, const, feature: str, prototypes: np.ndarray, cosine_scale: float,
               with_embeddings: bool, image_shape: tuple[int, int, int]):
    """Appends the cosine head to a backbone's ONNX ``nodes`` and returns the checked ModelProto."""
    import onnx
    from onnx import TensorProto, helper

    h, w, c = image_shape
    protos = np.asarray(prototypes, np.float64)
    p_hat = protos / np.sqrt(np.sum(protos * protos, axis=1, keepdims=True) + NORM_EPS)
    const("head.prototypes_t", p_hat.T.astype(np.float32))
    const("head.axes", np.array([1], np.int64))
    const("head.eps", np.array(NORM_EPS, np.float32))
    const("head.scale", np.array(cosine_scale, np.float32))
    nodes += [helper.make_node("Identity", [feature], [C.EMBEDDINGS]),
              helper.make_node("Mul", [C.EMBEDDINGS, C.EMBEDDINGS], ["head.sq"]),
              helper.make_node("ReduceSum", ["head.sq", "head.axes"], ["head.ss"], keepdims=1),
              helper.make_node("Add", ["head.ss", "head.eps"], ["head.ss_eps"]),
              helper.make_node("Sqrt", ["head.ss_eps"], ["head.norm"]),
              helper.make_node("Div", [C.EMBEDDINGS, "head.norm"], ["head.e_hat"]),
              helper.make_node("MatMul", ["head.e_hat", "head.prototypes_t"], ["head.cos"]),
              helper.make_node("Mul", ["head.cos", "head.scale"], [C.LOGITS])]
    k, d = protos.shape
    outputs = [helper.make_tensor_value_info(C.LOGITS, TensorProto.FLOAT, ["batch", k])]
    if with_embeddings:
        outputs.insert(0, helper.make_tensor_value_info(C.EMBEDDINGS, TensorProto.FLOAT, ["batch", d]))
    graph_proto = helper.make_graph(nodes, "tflite_train_peer",
                              [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", h, w, c])],
                              outputs, inits)
    onnx_model = helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                                   producer_name="tflite-train bench")
    onnx.checker.check_model(onnx_model)
    return onnx_model


def _inputs(layer) -> list:
    """The Keras tensors feeding ``layer`` (its first inbound node)."""
    tensors = layer._inbound_nodes[0].input_tensors
    return list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
