"""Opening only the signatures a command runs: the file's other subgraphs emptied before the interpreter sees it.

An interpreter builds every subgraph of the file, and LiteRT's default XNNPACK delegate packs the constant
weights of every one at the first allocation, whichever signature is called. ``keep_signatures`` empties,
in the bytes about to be handed to the interpreter (after the integrity check of the file as exported), the
operator list of every subgraph that no kept signature runs (their own subgraphs, the branches of their
control flow, the ``CALL_ONCE`` init), so that nothing is built, delegated or packed for them. Subgraph 0
keeps its operators whatever it holds: LiteRT applies its default delegate to no subgraph at all when
subgraph 0 has none (measured: ``infer`` on the builtin kernels, 5x slower). The signatures left out stay
listed by the interpreter; ``TrainableModel`` refuses to call them (their subgraphs compute nothing).

``keep_state_outputs`` does the same within ``get_state``: it keeps the operators that read the named state
variables and gives the other outputs no memory. Each ``READ_VARIABLE`` output is a dynamic tensor the
interpreter allocates at the run and keeps until it is destroyed: a checkpoint's read of a few layers then
holds those layers, not a copy of the whole state (EfficientNet-Lite0@128 on tflite-runtime 2.14: 33 MiB).

``skip_initial_values`` leaves state variables unset: the file's variable initialiser (the subgraph each
signature runs once through ``CALL_ONCE``) assigns every variable its exported value, and an assigned
variable holds its own copy of it for the interpreter's life. A phase that never reads some of them (the
selection reads no optimizer slot; the training reads only the selected layers': an update branch runs only
for a layer with a selected channel) drops their assignments and the operators that only computed their
values, so that they take no memory until ``set_state`` or ``reset_state`` assigns them. On
EfficientNet-Lite0@128 the Adam slots are 21.6 of the state's 32.7 MiB. Reading an unset variable is an
error in the interpreter; ``TrainableModel`` refuses it before (``unset_state``).
"""

from __future__ import annotations

from collections.abc import Collection

from tflite_train import contract as C
from tflite_train.runtime.model.flatbuffer_graph import Graph

__all__ = ["keep_signatures", "keep_state_outputs", "skip_initial_values"]


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


def keep_state_outputs(data: bytearray, names: Collection[str], graph: Graph) -> bool:
    """Keeps, in ``data``, only what ``get_state`` needs to return the outputs ``names``: the operators they
    are computed by (transitively, and the variable initialiser's ``CALL_ONCE``) stay, the others are
    dropped, and every other output is given a shape of zeros, so that it takes no memory (module docstring).

    Args:
      data: The model's bytes (edited in place).
      names: ``get_state`` outputs (state variable names) to keep.
      graph: ``read_graph(data)`` (read before any edit).

    Returns:
      True when edited; False when ``get_state`` runs other subgraphs than its initialiser, or the file other
      control flow (``Graph.plain_control_flow``): it is left whole.

    Raises:
      ValueError: a name that is not a ``get_state`` output.
    """
    outputs = graph.signature_outputs[C.GET_STATE]
    unknown = sorted(set(names) - set(outputs))
    if unknown:
        raise ValueError(f"get_state has no output {', '.join(unknown)}")
    subgraph = graph.signatures[C.GET_STATE]
    operators = graph.operators[subgraph]
    if not graph.plain_control_flow or any(op.subgraphs and op.name != "CALL_ONCE" for op in operators):
        return False
    producer = {tensor: i for i, op in enumerate(operators) for tensor in op.outputs}
    kept = {i for i, op in enumerate(operators) if op.name == "CALL_ONCE"}
    stack = [outputs[name] for name in names]
    while stack:
        index = producer.get(stack.pop())
        if index is not None and index not in kept:
            kept.add(index)
            stack.extend(t for t in operators[index].inputs if t >= 0)
    graph.keep_operators(data, subgraph, sorted(kept))
    wanted = {outputs[name] for name in names}
    for tensor in set(outputs.values()) - wanted:
        graph.empty_tensor(data, subgraph, tensor)
    return True


def skip_initial_values(data: bytearray, names: Collection[str], signatures: Collection[str], graph: Graph) -> frozenset[str]:
    """Drops, in ``data``, the initialiser's assignment of each state variable in ``names``, and every operator
    of the initialiser that then computes nothing it uses (module docstring).

    Args:
      data: The model's bytes (edited in place).
      names: State variables (``get_state`` outputs) to leave unset.
      signatures: The signatures the interpreter opens; their common initialiser is edited
        (``Graph.initialiser``).
      graph: ``read_graph(data)`` (read before any edit).

    Returns:
      The names left unset: empty when the opened signatures share no initialiser or the file has other
      control flow (``Graph.plain_control_flow``), which is then left whole.

    Raises:
      ValueError: a name that is not a ``get_state`` output.
    """
    unknown = sorted(set(names) - set(graph.signature_outputs[C.GET_STATE]))
    if unknown:
        raise ValueError(f"not state variables of the model: {', '.join(unknown[:5])}")
    init = graph.initialiser(signatures) if graph.plain_control_flow else None
    if init is None or not names:
        return frozenset()
    operators = graph.operators[init]
    variable_of = {t: op.variable for op in operators if op.name == "VAR_HANDLE" for t in op.outputs}
    skipped = {i for i, op in enumerate(operators)
               if op.name == "ASSIGN_VARIABLE" and variable_of.get(op.inputs[0]) in names}
    used = set(graph.subgraph_io(init)[1])
    kept = []
    for index in reversed(range(len(operators))):  # an operator whose outputs nothing kept reads is dropped
        op = operators[index]
        pure = bool(op.outputs) and not op.subgraphs and op.name != "ASSIGN_VARIABLE"
        if index in skipped or (pure and not used.intersection(op.outputs)):
            continue
        kept.append(index)
        used.update(t for t in op.inputs if t >= 0)
    graph.keep_operators(data, init, sorted(kept))
    return frozenset(variable_of[operators[i].inputs[0]] for i in skipped)
