"""Checks a model's metadata and graph against the contract before anything runs (CONTRACT.md
"Version policy" and "Validation on load")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tflite_train.contract.errors import ContractError
from tflite_train.contract.metadata_schema import (F_CACHED_CUTS, F_CANDIDATES, F_CHANNELS, F_CLASS_CAPACITY, F_DTYPE,
                                                   F_FEATURE_DIM, F_FORMAT, F_FORMAT_VERSION, F_HEIGHT, F_INPUT,
                                                   F_INPUTS, F_LAYERS, F_NAME, F_OPTIMIZER, F_OUT_CHANNELS, F_OUTPUTS,
                                                   F_SIGNATURE, F_SIGNATURES, F_TRAIN_VARIANTS, F_WIDTH, FORMAT,
                                                   FORMAT_VERSION, REQUIRED_FIELDS, F_FEATURES_SIGNATURE, F_INDEX,
                                                   F_INFER_SIGNATURE, F_LOWEST_INDEX, F_LOWEST_LAYER, F_SHAPE,
                                                   F_TRAIN_SIGNATURE, F_ACCUMULATE_SIGNATURE,
                                                   F_APPLY_ACCUMULATED_SIGNATURE, F_EPISODE_SIGNATURE)
from tflite_train.contract.signatures import (ACTIVATIONS, APPLY_ACCUMULATED, APPLY_ACCUMULATED_SPEC, CACHED_SIGNATURES,
                                              CANDIDATE_OUTPUTS, CHANNEL_MASK, EPISODE_SIGNATURES, FISHER, GET_STATE,
                                              IMAGES, INFER, PROTOTYPES, SET_HEAD, SET_SELECTION, SIGNATURE_NAMES,
                                              SPECS, STATE_TENSORS, TRAIN_STEP, accumulate_from_name, episode_from_name,
                                              features_name, infer_from_name, layer_state, train_from_name)

__all__ = ["check_format", "validate_graph"]


def check_format(metadata: Mapping[str, Any], fmt: str = FORMAT, version: int = FORMAT_VERSION,
                 remedy: str = "re-export the model") -> None:
    """The version rule: a reader accepts ``format == fmt`` and ``format_version == version`` (an export's
    metadata by default; a baked classifier's with ``BAKED_FORMAT``, ``BAKED_FORMAT_VERSION``).

    A newer version is refused with "update the runtime" (fields may have changed meaning); an
    older or malformed one with ``remedy`` ("re-export the model"). Unknown extra fields within a version are
    ignored (adding an optional field does not bump the version; renaming, removing or changing
    the meaning of a field or signature does).

    Raises:
      ContractError: naming the field and both values.
    """
    if not isinstance(metadata, Mapping):
        raise ContractError(f"model metadata must be a JSON object; got {type(metadata).__name__}")
    if metadata.get(F_FORMAT) != fmt:
        raise ContractError(f"metadata field {F_FORMAT!r} is {metadata.get(F_FORMAT)!r}; expected {fmt!r}")
    found = metadata.get(F_FORMAT_VERSION)
    if isinstance(found, int) and not isinstance(found, bool) and found > version:
        raise ContractError(f"metadata field {F_FORMAT_VERSION!r} is {found}, newer than the {version} this "
                            "runtime reads: update the runtime")
    if found != version:
        raise ContractError(f"metadata field {F_FORMAT_VERSION!r} is {found!r}; this runtime reads {version}: "
                            f"{remedy}")


def _mismatch(field: str, meta_value: Any, graph_value: Any) -> ContractError:
    return ContractError(f"model file lies: metadata {field} = {meta_value!r} but the graph has {graph_value!r}")


def validate_graph(metadata: Mapping[str, Any], graph: Mapping[str, Mapping[str, Mapping[str, tuple]]]) -> None:
    """Checks that the graph matches what the metadata claims, before any call.

    Args:
      metadata: The parsed metadata JSON.
      graph: signature -> {"inputs": {name: (shape, dtype)}, "outputs": {name: (shape, dtype)}} as the
        interpreter reports it (shape a tuple of ints, dynamic dims as -1 or 1; dtype a numpy-style
        name such as "float32").

    Checked: every contract signature (and train variant) exists with the declared inputs and
    outputs; ``class_capacity`` = rows of ``set_head``'s prototypes input; ``feature_dim`` = its
    columns; ``input`` height/width/channels/dtype = ``infer``'s images input; every candidate layer
    has its state variables (``get_state`` outputs) and a ``fisher`` output of ``out_channels``
    entries; the ``set_selection`` mask length = the candidates' channels; every ``cached_cuts`` entry
    names a layer of the table and its three signatures by the contract's names, and their
    ``activations`` tensors have the entry's shape.

    Raises:
      ContractError: one line naming the field, the metadata value and the graph value.
    """
    check_format(metadata)
    missing = [k for k in REQUIRED_FIELDS if k not in metadata]
    if missing:
        raise ContractError(f"model metadata lacks fields {missing}")
    try:
        _validate_graph(metadata, graph)
    except ContractError:
        raise
    except (KeyError, TypeError, IndexError, ValueError, AttributeError) as err:
        raise ContractError(f"model metadata is malformed ({type(err).__name__}: {err})") from err


def _validate_graph(metadata: Mapping[str, Any], graph: Mapping[str, Mapping[str, Mapping[str, tuple]]]) -> None:
    declared = metadata[F_SIGNATURES]
    variants = [v[F_SIGNATURE] for v in metadata.get(F_TRAIN_VARIANTS, [])]
    for name in (*SIGNATURE_NAMES, *variants):
        if name not in declared:
            raise ContractError(f"metadata field {F_SIGNATURES!r} lacks the contract signature {name!r}")
        if name not in graph:
            raise _mismatch(f"{F_SIGNATURES}.{name}", "present", f"no such signature (has {sorted(graph)})")
        for kind in (F_INPUTS, F_OUTPUTS):
            meta_names = sorted(declared[name][kind])
            graph_names = sorted(graph[name][kind])
            if meta_names != graph_names:
                raise _mismatch(f"{F_SIGNATURES}.{name}.{kind}", meta_names, graph_names)
        if not graph[name][F_INPUTS]:
            raise ContractError(f"signature {name!r} takes no input; the contract requires one (CONTRACT.md)")
        spec = SPECS.get(name, SPECS[TRAIN_STEP])
        for kind, tensors in ((F_INPUTS, spec.inputs), (F_OUTPUTS, spec.outputs)):
            for tensor in tensors:
                if tensor.name in (CANDIDATE_OUTPUTS, STATE_TENSORS):
                    continue
                shape, dtype = graph[name][kind][tensor.name]
                if str(dtype) != tensor.dtype or len(shape) != len(tensor.shape):
                    raise _mismatch(f"{F_SIGNATURES}.{name}.{kind}.{tensor.name}",
                                    f"{tensor.dtype} of rank {len(tensor.shape)} (CONTRACT.md)",
                                    f"{dtype} {tuple(shape)}")
    protos_shape, _ = graph[SET_HEAD][F_INPUTS][PROTOTYPES]
    if int(metadata[F_CLASS_CAPACITY]) != int(protos_shape[0]):
        raise _mismatch(F_CLASS_CAPACITY, metadata[F_CLASS_CAPACITY], int(protos_shape[0]))
    if int(metadata[F_FEATURE_DIM]) != int(protos_shape[1]):
        raise _mismatch(F_FEATURE_DIM, metadata[F_FEATURE_DIM], int(protos_shape[1]))
    shape, dtype = graph[INFER][F_INPUTS][IMAGES]
    inp = metadata[F_INPUT]
    for axis, key in enumerate((F_HEIGHT, F_WIDTH, F_CHANNELS), start=1):
        if int(inp[key]) != int(shape[axis]):
            raise _mismatch(f"{F_INPUT}.{key}", inp[key], int(shape[axis]))
    if inp[F_DTYPE] != str(dtype):
        raise _mismatch(f"{F_INPUT}.{F_DTYPE}", inp[F_DTYPE], str(dtype))
    channels = {layer[F_NAME]: int(layer[F_OUT_CHANNELS]) for layer in metadata[F_LAYERS]}
    state_out = graph[GET_STATE][F_OUTPUTS]
    optimizer = metadata[F_OPTIMIZER][F_NAME]
    total = 0
    for layer in metadata[F_CANDIDATES]:
        if layer not in channels:
            raise ContractError(f"metadata field {F_CANDIDATES!r} names {layer!r}, not in {F_LAYERS!r}")
        for var in layer_state(layer, optimizer):
            if var not in state_out:
                raise _mismatch(f"{F_CANDIDATES}[{layer!r}]", f"state variable {var}", "no such get_state output")
        fisher_out = graph[FISHER][F_OUTPUTS].get(layer)
        if fisher_out is None:
            raise _mismatch(f"{F_CANDIDATES}[{layer!r}]", "a fisher output", "none")
        if tuple(int(d) for d in fisher_out[0]) != (channels[layer],):
            raise _mismatch(f"{F_LAYERS}[{layer!r}].{F_OUT_CHANNELS}", channels[layer], tuple(fisher_out[0]))
        total += channels[layer]
    mask_shape, _ = graph[SET_SELECTION][F_INPUTS][CHANNEL_MASK]
    if total != int(mask_shape[0]):
        raise _mismatch(f"{F_CANDIDATES} (sum of out_channels)", total, int(mask_shape[0]))
    _validate_cached_cuts(metadata, graph)


def _check_cut_signature(declared: Mapping[str, Any], graph: Mapping[str, Mapping[str, Mapping[str, tuple]]],
                         name: str, spec: Any, layer: str | None, shape: tuple[int, ...] | None) -> None:
    """One signature of a cut (or ``apply_accumulated``): declared and in the graph with the same tensor names,
    every tensor of ``spec`` with its dtype, and an ``activations`` tensor of the cut's ``shape``."""
    if name not in declared or name not in graph:
        raise _mismatch(f"{F_SIGNATURES}.{name}", "present", "no such signature")
    for kind, tensors in ((F_INPUTS, spec.inputs), (F_OUTPUTS, spec.outputs)):
        if sorted(declared[name][kind]) != sorted(graph[name][kind]):
            raise _mismatch(f"{F_SIGNATURES}.{name}.{kind}", sorted(declared[name][kind]), sorted(graph[name][kind]))
        for tensor in tensors:
            if tensor.name not in graph[name][kind]:
                raise _mismatch(f"{F_SIGNATURES}.{name}.{kind}", f"a tensor {tensor.name!r}", "none")
            got_shape, dtype = graph[name][kind][tensor.name]
            if str(dtype) != tensor.dtype:
                raise _mismatch(f"{F_SIGNATURES}.{name}.{kind}.{tensor.name}", tensor.dtype, str(dtype))
            if len(got_shape) != len(tensor.shape) and tensor.name != ACTIVATIONS:
                raise _mismatch(f"{F_SIGNATURES}.{name}.{kind}.{tensor.name}",
                                f"{tensor.dtype} of rank {len(tensor.shape)} (CONTRACT.md)", f"{dtype} {tuple(got_shape)}")
            if tensor.name == ACTIVATIONS and tuple(int(d) for d in got_shape[1:]) != shape:
                raise _mismatch(f"{F_CACHED_CUTS}[{layer!r}].{F_SHAPE}", list(shape), list(got_shape[1:]))


def _validate_cached_cuts(metadata: Mapping[str, Any], graph: Mapping[str, Mapping[str, Mapping[str, tuple]]]) -> None:
    """The cached cut entries (metadata ``cached_cuts``) against the layer table and the graph, with
    their optional episode and accumulation signatures and ``apply_accumulated``."""
    indices = {layer[F_NAME]: int(layer[F_INDEX]) for layer in metadata[F_LAYERS]}
    declared = metadata[F_SIGNATURES]
    accumulating = []
    for entry in metadata.get(F_CACHED_CUTS, []):
        layer = entry[F_LOWEST_LAYER]
        if indices.get(layer) != int(entry[F_LOWEST_INDEX]):
            raise ContractError(f"metadata field {F_CACHED_CUTS!r}: layer {layer!r} at index {entry[F_LOWEST_INDEX]!r} "
                                f"is not in {F_LAYERS!r} (index {indices.get(layer)!r})")
        shape = tuple(int(d) for d in entry[F_SHAPE])
        if not shape or min(shape) < 1:
            raise ContractError(f"metadata field {F_CACHED_CUTS}[{layer!r}].{F_SHAPE} must be positive sizes; got {shape}")
        expected = [(F_FEATURES_SIGNATURE, features_name(layer), CACHED_SIGNATURES[0]),
                    (F_TRAIN_SIGNATURE, train_from_name(layer), CACHED_SIGNATURES[1]),
                    (F_INFER_SIGNATURE, infer_from_name(layer), CACHED_SIGNATURES[2])]
        optional = [(F_EPISODE_SIGNATURE, episode_from_name(layer), EPISODE_SIGNATURES[0]),
                    (F_ACCUMULATE_SIGNATURE, accumulate_from_name(layer), EPISODE_SIGNATURES[1])]
        expected += [item for item in optional if item[0] in entry]
        accumulating += [layer] if F_ACCUMULATE_SIGNATURE in entry else []
        for key, name, spec in expected:
            if entry[key] != name:
                raise ContractError(f"metadata field {F_CACHED_CUTS}[{layer!r}].{key} is {entry[key]!r}; expected {name!r}")
            _check_cut_signature(declared, graph, name, spec, layer, shape)
    apply = metadata.get(F_APPLY_ACCUMULATED_SIGNATURE)
    if accumulating and apply is None:
        raise ContractError(f"metadata field {F_CACHED_CUTS}[{accumulating[0]!r}] has an {F_ACCUMULATE_SIGNATURE} but "
                            f"the metadata lacks {F_APPLY_ACCUMULATED_SIGNATURE!r}")
    if apply is not None:
        if apply != APPLY_ACCUMULATED:
            raise ContractError(f"metadata field {F_APPLY_ACCUMULATED_SIGNATURE!r} is {apply!r}; expected "
                                f"{APPLY_ACCUMULATED!r}")
        _check_cut_signature(declared, graph, apply, APPLY_ACCUMULATED_SPEC, None, None)
