"""The TFLite flatbuffer schema as data: the tables, fields and unions a model file holds.

From ``tensorflow/lite/schema/schema.fbs`` (schema version 3c): a field's id is its position in its
table's declaration (deprecated fields keep their id, e.g. ``SignatureDef.deprecated_tag`` is 3) and
its vtable slot is ``4 + 2 * id``. Cross-checked against the vtable offsets of the generated
``schema_py_generated.py`` of TensorFlow 2.21 / ai-edge-litert 2.3 (neither is importable in the Pi
environment, hence this table). ``flatbuffer_verify`` walks a file with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_TENSOR_TYPE", "SCHEMA", "TENSOR_TYPE_BYTES", "UNIONS", "WIDTH", "Field"]

# A field: (name, kind, argument). Kinds: a scalar type ("u8", "i8", "bool", "u16", "i32", "u32",
# "f32", "i64", "u64"), "string", "vector" (argument: element type), "tables" (a vector of tables of
# the argument's type), "table" (a sub-table) and "union" (argument: (type field id, union name)).
WIDTH = {"u8": 1, "i8": 1, "bool": 1, "u16": 2, "i32": 4, "u32": 4, "f32": 4, "i64": 8, "u64": 8}

Field = tuple[str, str, Any]
SCHEMA: Mapping[str, Mapping[int, Field]] = {
    "Model": {0: ("version", "u32", None), 1: ("operator_codes", "tables", "OperatorCode"),
              2: ("subgraphs", "tables", "SubGraph"), 3: ("description", "string", None),
              4: ("buffers", "tables", "Buffer"), 5: ("metadata_buffer", "vector", "i32"),
              6: ("metadata", "tables", "Metadata"), 7: ("signature_defs", "tables", "SignatureDef"),
              8: ("external_buffer_groups", "tables", "ExternalBufferGroup"),
              9: ("external_buffers", "tables", "ExternalBuffer")},
    "SubGraph": {0: ("tensors", "tables", "Tensor"), 1: ("inputs", "vector", "i32"), 2: ("outputs", "vector", "i32"),
                 3: ("operators", "tables", "Operator"), 4: ("name", "string", None),
                 5: ("debug_metadata_index", "i32", None)},
    "Tensor": {0: ("shape", "vector", "i32"), 1: ("type", "i8", None), 2: ("buffer", "u32", None),
               3: ("name", "string", None), 4: ("quantization", "table", "QuantizationParameters"),
               5: ("is_variable", "bool", None), 6: ("sparsity", "table", "SparsityParameters"),
               7: ("shape_signature", "vector", "i32"), 8: ("has_rank", "bool", None),
               9: ("variant_tensors", "tables", "VariantSubType"), 10: ("external_buffer", "u32", None)},
    "Operator": {0: ("opcode_index", "u32", None), 1: ("inputs", "vector", "i32"), 2: ("outputs", "vector", "i32"),
                 3: ("builtin_options_type", "u8", None), 4: ("builtin_options", "union", (3, "BuiltinOptions")),
                 5: ("custom_options", "vector", "u8"), 6: ("custom_options_format", "i8", None),
                 7: ("mutating_variable_inputs", "vector", "bool"), 8: ("intermediates", "vector", "i32"),
                 9: ("large_custom_options_offset", "u64", None), 10: ("large_custom_options_size", "u64", None),
                 11: ("builtin_options_2_type", "u8", None),
                 12: ("builtin_options_2", "union", (11, "BuiltinOptions2")),
                 13: ("debug_metadata_index", "i32", None)},
    "OperatorCode": {0: ("deprecated_builtin_code", "i8", None), 1: ("custom_code", "string", None),
                     2: ("version", "i32", None), 3: ("builtin_code", "i32", None)},
    "Buffer": {0: ("data", "vector", "u8"), 1: ("offset", "u64", None), 2: ("size", "u64", None)},
    "Metadata": {0: ("name", "string", None), 1: ("buffer", "u32", None)},
    "SignatureDef": {0: ("inputs", "tables", "TensorMap"), 1: ("outputs", "tables", "TensorMap"),
                     2: ("signature_key", "string", None), 4: ("subgraph_index", "u32", None)},
    "TensorMap": {0: ("name", "string", None), 1: ("tensor_index", "u32", None)},
    "QuantizationParameters": {0: ("min", "vector", "f32"), 1: ("max", "vector", "f32"), 2: ("scale", "vector", "f32"),
                               3: ("zero_point", "vector", "i64"), 4: ("details_type", "u8", None),
                               5: ("details", "union", (4, "QuantizationDetails")),
                               6: ("quantized_dimension", "i32", None)},
    "SparsityParameters": {0: ("traversal_order", "vector", "i32"), 1: ("block_map", "vector", "i32"),
                           2: ("dim_metadata", "tables", "DimensionMetadata")},
    "DimensionMetadata": {0: ("format", "i8", None), 1: ("dense_size", "i32", None),
                          2: ("array_segments_type", "u8", None),
                          3: ("array_segments", "union", (2, "SparseIndexVector")),
                          4: ("array_indices_type", "u8", None),
                          5: ("array_indices", "union", (4, "SparseIndexVector"))},
    "Int32Vector": {0: ("values", "vector", "i32")},
    "Uint16Vector": {0: ("values", "vector", "u16")},
    "Uint8Vector": {0: ("values", "vector", "u8")},
    "CustomQuantization": {0: ("custom", "vector", "u8")},
    "VariantSubType": {0: ("shape", "vector", "i32"), 1: ("type", "i8", None), 2: ("has_rank", "bool", None)},
    "ExternalBufferGroup": {0: ("name", "string", None)},
    "ExternalBuffer": {0: ("id", "u32", None), 1: ("group", "u32", None), 2: ("offset", "u64", None),
                       3: ("length", "u64", None)},
    # the option tables (union members) with reference fields; the others hold scalars only
    "ConcatEmbeddingsOptions": {0: ("num_channels", "i32", None), 1: ("num_columns_per_channel", "vector", "i32"),
                                2: ("embedding_dim_per_channel", "vector", "i32")},
    "ReshapeOptions": {0: ("new_shape", "vector", "i32")},
    "SqueezeOptions": {0: ("squeeze_dims", "vector", "i32")},
    "VarHandleOptions": {0: ("container", "string", None), 1: ("shared_name", "string", None)},
    "BucketizeOptions": {0: ("boundaries", "vector", "f32")},
    "StablehloBroadcastInDimOptions": {0: ("broadcast_dimensions", "vector", "i64")},
    "StablehloSliceOptions": {0: ("start_indices", "vector", "i64"), 1: ("limit_indices", "vector", "i64"),
                              2: ("strides", "vector", "i64")},
    "StablehloConvolutionOptions": {0: ("window_strides", "vector", "i64"), 1: ("padding", "vector", "i64"),
                                    2: ("lhs_dilation", "vector", "i64"), 3: ("rhs_dilation", "vector", "i64"),
                                    4: ("window_reversal", "vector", "bool"),
                                    7: ("input_spatial_dimensions", "vector", "i64"),
                                    10: ("kernel_spatial_dimensions", "vector", "i64"),
                                    13: ("output_spatial_dimensions", "vector", "i64"),
                                    16: ("precision_config", "vector", "u32")},
    "StablehloCustomCallOptions": {0: ("call_target_name", "string", None), 2: ("backend_config", "string", None),
                                   4: ("called_computations", "vector", "i32"),
                                   5: ("custom_attributes", "vector", "u8")},
    "StablehloReduceOptions": {0: ("dimensions", "vector", "i64")},
    "StablehloScatterOptions": {1: ("update_window_dims", "vector", "i64"),
                                2: ("inserted_window_dims", "vector", "i64"),
                                3: ("scatter_dims_to_operand_dims", "vector", "i64")},
    "StablehloDynamicSliceOptions": {0: ("slice_sizes", "vector", "i64")},
    "StablehloPadOptions": {0: ("edge_padding_low", "vector", "i64"), 1: ("edge_padding_high", "vector", "i64"),
                            2: ("interior_padding", "vector", "i64")},
    "StablehloDotGeneralOptions": {0: ("lhs_batching_dimensions", "vector", "i64"),
                                   1: ("rhs_batching_dimensions", "vector", "i64"),
                                   2: ("lhs_contracting_dimensions", "vector", "i64"),
                                   3: ("rhs_contracting_dimensions", "vector", "i64"),
                                   4: ("precision_config", "vector", "u32")},
    "StablehloReduceWindowOptions": {0: ("window_dimensions", "vector", "i64"), 1: ("window_strides", "vector", "i64"),
                                     2: ("base_dilations", "vector", "i64"), 3: ("window_dilations", "vector", "i64"),
                                     4: ("padding", "vector", "i64")},
    "StablehloGatherOptions": {0: ("offset_dims", "vector", "i64"), 1: ("collapsed_slice_dims", "vector", "i64"),
                               2: ("start_index_map", "vector", "i64"), 4: ("slice_sizes", "vector", "i64")},
    "StablehloTransposeOptions": {0: ("permutation", "vector", "i64")},
    "StableHLOCompositeOptions": {0: ("name", "string", None), 2: ("composite_attributes", "vector", "u8")},
    "StablehloCaseOptions": {0: ("branch_subgraph_indices", "vector", "i32")},
    "": {},  # an option table of scalars only: structure checked, fields not interpreted
}

# Union name -> (largest type value, type value -> member table with reference fields). Type 0 is NONE;
# every other value up to the largest is a member (schema.fbs ``union BuiltinOptions`` ...).
UNIONS: Mapping[str, tuple[int, Mapping[int, str]]] = {
    "BuiltinOptions": (126, {3: "ConcatEmbeddingsOptions", 17: "ReshapeOptions", 30: "SqueezeOptions",
                             111: "VarHandleOptions", 115: "BucketizeOptions"}),
    "BuiltinOptions2": (23, {2: "StablehloBroadcastInDimOptions", 3: "StablehloSliceOptions",
                             4: "StablehloConvolutionOptions", 5: "StablehloCustomCallOptions",
                             6: "StablehloReduceOptions", 7: "StablehloScatterOptions",
                             9: "StablehloDynamicSliceOptions", 10: "StablehloPadOptions",
                             12: "StablehloDotGeneralOptions", 13: "StablehloReduceWindowOptions",
                             16: "StablehloGatherOptions", 17: "StablehloTransposeOptions",
                             21: "StableHLOCompositeOptions", 23: "StablehloCaseOptions"}),
    "QuantizationDetails": (2, {1: "CustomQuantization"}),
    "SparseIndexVector": (3, {1: "Int32Vector", 2: "Uint16Vector", 3: "Uint8Vector"}),
}

TENSOR_TYPE_BYTES: Mapping[int, float] = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 8: 8, 9: 1, 10: 8, 11: 16, 12: 8,
                                          15: 4, 16: 2, 17: 0.5, 18: 2, 19: 0.25, 20: 0.5}
"""Bytes per element of each fixed-size ``TensorType`` (INT4/UINT4 two per byte, INT2 four); STRING (5),
RESOURCE (13) and VARIANT (14) have no fixed size."""
MAX_TENSOR_TYPE = 20
