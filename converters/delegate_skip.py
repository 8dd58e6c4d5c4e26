"""Keeps data-dependent shapes out of the XNNPACK delegate's way on tflite-runtime 2.14.

tflite-runtime 2.14's XNNPACK delegate supports static shapes only: ``ModifyGraphWithDelegate``
prepares every subgraph and refuses the whole model (``kTfLiteApplicationError``, a RuntimeError
without a message in Python) when any subgraph holds a dynamic-sized tensor after ``Prepare``. The
sparse update branches (``converters.trainable_module``: ``WHERE`` of the selected channels, then
GATHER/SCATTER_ND of a data-dependent count) are such subgraphs. Two things keep them harmless:

* their IF has no outputs (``trainable_module``), so the parent subgraph stays static
  (``if.cc`` marks the IF's outputs dynamic when a branch has dynamic tensors, and only those);
* this pass names each subgraph that holds a data-dependent-shape op ``VALIDATION:<name>``: the
  interpreter skips subgraphs so named when it applies a delegate (``Interpreter::
  ModifyGraphWithDelegateImpl``, since TF 2.6) and runs them on its builtin kernels, which is how
  they run anyway (their shapes are not known before ``Invoke``).

Subgraph names carry no other meaning in the contract (signatures name subgraphs by index).

The exporter's update branches have static shapes since the masked update
(``converters.trainable_module``), so on current exports this pass finds nothing to mark; it still
guards a graph that holds such an op.
"""

from __future__ import annotations

from tensorflow.lite.python import schema_py_generated as schema

SKIP_PREFIX = b"VALIDATION:"
"""The prefix by which the TFLite interpreter skips a subgraph when applying delegates."""
DATA_DEPENDENT_SHAPE_OPS = (schema.BuiltinOperator.WHERE,)
"""Builtin ops whose output shape depends on input values (the ones the exporter emits)."""

__all__ = ["DATA_DEPENDENT_SHAPE_OPS", "SKIP_PREFIX", "mark_dynamic_subgraphs_in",
           "skipped_subgraphs"]


def _dynamic_opcodes(model: schema.ModelT) -> set[int]:
    return {i for i, c in enumerate(model.operatorCodes)
            if max(c.builtinCode, c.deprecatedBuiltinCode) in DATA_DEPENDENT_SHAPE_OPS}


def mark_dynamic_subgraphs_in(obj: schema.ModelT) -> bool:
    """Renames every subgraph that holds a data-dependent-shape op ``VALIDATION:<name>`` (delegates
    skip it). Returns True when a name changed.

    Raises:
      ValueError: a signature's own subgraph holds such an op (its outputs would be dynamic and the
        delegate would refuse the model; the exporter never emits one).
    """
    codes = _dynamic_opcodes(obj)
    if not codes:
        return False
    signature_subgraphs = {sig.subgraphIndex: sig.signatureKey for sig in obj.signatureDefs or []}
    changed = False
    for index, subgraph in enumerate(obj.subgraphs):
        name = subgraph.name or b""
        if name.startswith(SKIP_PREFIX) or not any(op.opcodeIndex in codes for op in subgraph.operators or []):
            continue
        if index in signature_subgraphs:
            raise ValueError(f"signature {signature_subgraphs[index]!r} holds an op with a data-dependent output "
                             f"shape; only IF branches without outputs may")
        subgraph.name = SKIP_PREFIX + name
        changed = True
    return changed


def skipped_subgraphs(model: bytes) -> list[str]:
    """Names of the subgraphs delegates skip (``VALIDATION:`` prefix)."""
    root = schema.Model.GetRootAsModel(model, 0)
    names = [root.Subgraphs(i).Name() or b"" for i in range(root.SubgraphsLength())]
    return [n.decode() for n in names if n.startswith(SKIP_PREFIX)]
