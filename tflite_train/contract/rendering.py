"""Renders the contract for its other readers: the tables of CONTRACT.md and the Java ``Contract`` class.

Both outputs are committed; ``tests/contract/test_contract.py`` fails when either differs from what this
module renders now. Regenerate with ``python -m tflite_train.contract --markdown`` (paste the tables)
and ``python -m tflite_train.contract --java > android_demo/core/src/main/java/org/tflitetrain/core/model/Contract.java``.
"""

from __future__ import annotations

import json
import math

from tflite_train.contract import baked_format, checkpoint_format, metadata_schema, signatures
from tflite_train.contract.baked_format import BAKED_FIELDS, CLASSIFY_SPEC
from tflite_train.contract.metadata_schema import METADATA_FIELDS, REQUIRED_FIELDS
from tflite_train.contract.protocol_constants import default_protocol_constants
from tflite_train.contract.signatures import (APPLY_ACCUMULATED_SPEC, CACHED_SIGNATURES, EPISODE_SIGNATURES,
                                              GLOBAL_STATE, OPTIMIZER_SLOTS, SIGNATURES)

__all__ = ["JAVA_CONTRACT_PATH", "java_source", "markdown_tables"]

JAVA_CONTRACT_PATH = "android_demo/core/src/main/java/org/tflitetrain/core/model/Contract.java"
"""Where the generated Java class lives (relative to the repository root)."""


def markdown_tables() -> str:
    """The signature and metadata tables of CONTRACT.md (the export's, then the baked classifier's), rendered
    from this module (a test keeps the document in step with it)."""
    def tensors(specs):
        return "<br>".join(f"`{t.name}` {t.dtype}[{', '.join(t.shape)}]" for t in specs)

    def signature_table(specs):
        lines = ["| signature | inputs | outputs | reads | writes | does |", "|---|---|---|---|---|---|"]
        for s in specs:
            lines.append(f"| `{s.name}` | {tensors(s.inputs)} | {tensors(s.outputs)} | {', '.join(s.reads) or '-'} | "
                         f"{', '.join(s.writes) or '-'} | {s.purpose} |")
        return lines

    def field_table(fields):
        lines = ["| field | type | required | meaning |", "|---|---|---|---|"]
        for f in fields:
            lines.append(f"| `{f.path}` | {f.type} | {'yes' if f.required else 'no'} | {f.meaning} |")
        return lines

    lines = signature_table((*SIGNATURES, *CACHED_SIGNATURES, *EPISODE_SIGNATURES, APPLY_ACCUMULATED_SPEC))
    lines += ["", *field_table(METADATA_FIELDS)]
    lines += ["", *signature_table((CLASSIFY_SPEC,)), "", *field_table(BAKED_FIELDS)]
    return "\n".join(lines) + "\n"


def _java_constants(module) -> list[str]:
    lines = []
    for name in module.__all__:
        value = getattr(module, name)
        if isinstance(value, bool) or not isinstance(value, (int, str)) or not name.isupper():
            continue
        kind = "int" if isinstance(value, int) else "String"
        lines.append(f"  public static final {kind} {name} = {json.dumps(value)};")
    return lines


def _java_number(value: int | float, java_type: str) -> str:
    """A Java literal of type ``java_type`` ("int" or "double") for ``value``."""
    if java_type == "int":
        return str(value)
    if math.isnan(value):
        return "Double.NaN"
    if math.isinf(value):
        return "Double.POSITIVE_INFINITY" if value > 0 else "Double.NEGATIVE_INFINITY"
    return repr(float(value))


def _java_protocol() -> list[str]:
    lines = ["", "  // tflite_train.runtime.adaptation.protocol.DEFAULT_PROTOCOL: the default adaptation protocol "
                 "(AdaptationConfig.Builder's defaults)"]
    for constant in default_protocol_constants():
        lines += [f"  /** {constant.doc} */",
                  f"  public static final {constant.java_type} {constant.name} = "
                  f"{_java_number(constant.value, constant.java_type)};"]
    return lines


def _java_list(values) -> str:
    return "List.of(" + ", ".join(json.dumps(v) for v in values) + ")"


_JAVA_METHODS = """
  /** Slot names of an optimizer ({@link #OPTIMIZER_SLOTS}): a slot variable is {@code <layer>_<kernel|bias>_<slot>}. */
  public static List<String> optimizerSlots(String optimizer) {
    List<String> slots = OPTIMIZER_SLOTS.get(optimizer);
    if (slots == null) {
      throw new IllegalArgumentException("optimizer must be one of " + new TreeSet<>(OPTIMIZER_SLOTS.keySet())
          + "; got " + optimizer);
    }
    return slots;
  }

  /** The state variables of one candidate layer, in {@code get_state} order: kernel, bias, their slots, mask. */
  public static List<String> layerState(String layer, String optimizer) {
    List<String> out = new ArrayList<>(List.of(layer + KERNEL_SUFFIX, layer + BIAS_SUFFIX));
    for (String param : List.of(KERNEL_SUFFIX, BIAS_SUFFIX)) {
      for (String slot : optimizerSlots(optimizer)) {
        out.add(layer + param + "_" + slot);
      }
    }
    out.add(layer + MASK_SUFFIX);
    return out;
  }
"""


def java_source() -> str:
    """The text of the generated ``Contract.java`` (pure): every name constant of the contract modules
    under its Python name, the default adaptation protocol's numbers (``PROTOCOL_*``,
    :mod:`~tflite_train.contract.protocol_constants`), the signature order, the global state, the required
    metadata fields, the optimizer slots, and ``optimizerSlots`` / ``layerState``."""
    slots = ", ".join(f"{json.dumps(k)}, {_java_list(v)}" for k, v in OPTIMIZER_SLOTS.items())
    lines = [
        "// GENERATED by `python -m tflite_train.contract --java` from tflite_train/contract/ (PROTOCOL_*: from",
        "// tflite_train/runtime/adaptation/protocol.py). Do not edit: tests/contract/test_contract.py fails when this file differs",
        "// from the Python sources.",
        "package org.tflitetrain.core.model;",
        "",
        "import java.util.ArrayList;",
        "import java.util.List;",
        "import java.util.Map;",
        "import java.util.TreeSet;",
        "",
        "/**",
        " * Every name of the trainable-model contract (CONTRACT.md): signatures, tensors, state, metadata",
        " * fields, metadata entries and the checkpoint header, spelled once in {@code tflite_train/contract/};",
        " * and the numbers of the default adaptation protocol ({@code PROTOCOL_*}, Python's",
        " * {@code tflite_train.runtime.adaptation.protocol.DEFAULT_PROTOCOL}), which {@code AdaptationConfig.Builder} defaults to.",
        " *",
        " * <p>Every signature takes at least one input: TFLite's Java {@code Interpreter.runSignature} throws",
        ' * {@code IllegalArgumentException("Input error: Inputs should not be null or empty.")} for an empty',
        " * input map, so {@code get_state} and {@code reset_state} take the scalar int32 {@link #DUMMY}.",
        " */",
        "public final class Contract {",
    ]
    for module in (signatures, metadata_schema, checkpoint_format, baked_format):
        lines += ["", f"  // {module.__name__}"] + _java_constants(module)
    lines += _java_protocol()
    lines += [
        "",
        "  /** Every signature of the contract, in export order. */",
        f"  public static final List<String> SIGNATURE_NAMES = {_java_list(s.name for s in SIGNATURES)};",
        "  /** The state variables after the per-layer ones, in {@code get_state} order. */",
        f"  public static final List<String> GLOBAL_STATE = {_java_list(GLOBAL_STATE)};",
        "  /** Top-level metadata fields a model must have. */",
        f"  public static final List<String> REQUIRED_FIELDS = {_java_list(REQUIRED_FIELDS)};",
        "  /** Every documented metadata field path (nested fields dotted). */",
        f"  public static final List<String> METADATA_FIELDS = {_java_list(f.path for f in METADATA_FIELDS)};",
        "  /** Every field of a baked classifier's metadata (all required). */",
        f"  public static final List<String> BAKED_FIELDS = {_java_list(f.path for f in BAKED_FIELDS)};",
        "  /** Optimizer name -> slot names. */",
        f"  public static final Map<String, List<String>> OPTIMIZER_SLOTS = Map.of({slots});",
    ]
    lines += _JAVA_METHODS.rstrip("\n").split("\n")
    lines += ["", "  private Contract() {}", "}", ""]
    return "\n".join(lines)
