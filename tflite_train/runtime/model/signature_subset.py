"""Opening only the signatures a command runs: the file's other subgraphs emptied before the interpreter sees it.

An interpreter builds every subgraph of the file, and LiteRT's default XNNPACK delegate packs the constant
weights of every one at the first allocation, whichever signature is called. ``keep_signatures`` empties,
in the bytes about to be handed to the interpreter (after the integrity check of the file as exported), the
operator list of every subgraph that no kept signature runs (their own subgraphs, the branches of their
control flow, the ``CALL_ONCE`` init), so that nothing is built, delegated or packed for them. Subgraph 0
keeps its operators whatever it holds: LiteRT applies its default delegate to no subgraph at all when
subgraph 0 has none (measured: ``infer`` on the builtin kernels, 5x slower). The signatures left out stay
listed by the interpreter; ``TrainableModel`` refuses to call them (their subgraphs compute nothing).
"""

from __future__ import annotations

from collections.abc import Collection

from tflite_train.runtime.model.flatbuffer_graph import Graph

__all__ = ["keep_signatures"]


def keep_signatures(data: bytearray, signatures: Collection[str], graph: Graph) -> int:
    """Empties, in ``data``, every subgraph that neither subgraph 0 nor a signature in ``signatures`` runs.

    Args:
      data: The model's bytes (edited in place).
      signatures: The signatures to keep (each must be one of the file's).
      graph: ``read_graph(data)`` (read before any edit).

    Returns:
      The number of subgraphs emptied; 0 when the file runs subgraphs through other control flow than
      ``IF``/``WHILE``/``CALL_ONCE`` (``Graph.plain_control_flow``), which is left whole.

    Raises:
      ValueError: a signature the file does not have.
    """
    unknown = sorted(set(signatures) - set(graph.signatures))
    if unknown:
        raise ValueError(f"the model has no signature {', '.join(unknown)}; it has {sorted(graph.signatures)}")
    if not graph.plain_control_flow:
        return 0
    kept = graph.reachable([0, *(graph.signatures[name] for name in signatures)])
    emptied = 0
    for index, operators in enumerate(graph.operators):
        if index not in kept and operators:
            graph.keep_operators(data, index, [])
            emptied += 1
    return emptied
