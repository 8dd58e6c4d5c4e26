"""What each phase of a run from the export opens (issue 43): ``adapt(..., reopen=True)`` selects on one
interpreter and trains on another, each built on only what its phase calls and assigning only the state it reads.

The selection (the head, the Fisher pass, the candidates' weights, the selection itself) calls
``SELECTION_SIGNATURES`` and reads no optimizer slot: ``adapt_job`` opens the model on those signatures with every
slot unset (``TrainableModel(unset_state=TrainableModel.slot_names)``). Once the selection is made,
``training_model`` closes that interpreter and opens the file again on ``training_signatures`` (the chosen cut's
steps, ``infer``, the state's setters, ``get_state`` cut to what the checkpoint reads), with the slots of the
layers it does not train unset: a train step reads a layer's slots only in its update branch, which runs only
for a layer with a selected channel. Each phase's interpreter then holds its own arenas and the state it reads,
never the other phase's (``bench/results/MEMORY.md``); the results are the same, bit for bit
(``tests/runtime/adaptation/test_phases.py``).
"""

from __future__ import annotations

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.adaptation.adapt_config import AdaptConfig
from tflite_train.runtime.adaptation.free_memory import release_free_memory
from tflite_train.runtime.adaptation.replay_memory import lineage_cut
from tflite_train.runtime.checkpoint.checkpoint import checkpoint_state_names
from tflite_train.runtime.model.interpreter import TrainableModel
from tflite_train.sparse.selection import Selection

__all__ = ["SELECTION_SIGNATURES", "training_model", "training_signatures"]

SELECTION_SIGNATURES = (C.RESET_STATE, C.INFER, C.SET_HEAD, C.SET_HPARAMS, C.FISHER, C.GET_STATE, C.SET_SELECTION)
"""What ``adapt(..., reopen=True)`` calls of a run from the export before it reopens the model for the training
(the head, the Fisher pass, the candidates' weights, the selection): a model opened on only these
(``TrainableModel(signatures=...)``) is enough for it, and for ``adapt_job``'s accuracy of the prototype head."""


def training_signatures(model: TrainableModel, config: AdaptConfig, training: bool = True) -> frozenset[str]:
    """The signatures a run from the export calls after its selection (``adapt(..., reopen=True)``), with the
    selection set on ``model``: the state's (reset, head, learning rate, selection, ``get_state`` for the
    checkpoint, ``set_state`` for a rate choice), ``infer`` (the final head, the accuracies), the ``features``
    of the checkpoint's replay memory at its cut (``replay_memory.lineage_cut``), and, when ``training``, the
    steps': at the selection's cached cut (``TrainableModel.cache_cut``; steps from images run there too)
    ``features``, ``train_step_from``, ``infer_from`` when the prototypes or a rate choice embed from the
    cut, and the episode or accumulation step the config asks for; without a usable cut, the train
    signature from images (``TrainableModel.train_signature``).
    """
    names = {C.RESET_STATE, C.SET_HEAD, C.SET_HPARAMS, C.SET_SELECTION, C.GET_STATE, C.INFER}
    if config.rate_choice:
        names.add(C.SET_STATE)
    cut = None if model.cache_unsafe else model.cache_cut()
    lineage = None if model.cache_unsafe else lineage_cut(model.cached_cuts, None if cut is None else cut.index)
    if lineage is not None:
        names.add(lineage.features)
    if not training:
        return frozenset(names)
    if cut is None:
        return frozenset(names | {model.train_signature()})
    names.update((cut.features, cut.train_step))
    if config.prototype_mode != "fixed" or config.rate_choice:
        names.add(cut.infer)
    if config.prototype_mode == "episode" and cut.episode_signature is not None:
        names.add(cut.episode_signature)
    if config.batch_mode == "accumulate" and cut.accumulate_signature is not None and model.can_accumulate:
        names.update((cut.accumulate_signature, model.metadata[C.F_APPLY_ACCUMULATED_SIGNATURE]))
    return frozenset(names)


def training_model(model: TrainableModel, selection: Selection, mask: np.ndarray, config: AdaptConfig,
                   training: bool) -> None:
    """Reopens ``model`` (the selection's) for the rest of the run under ``selection`` (``mask``: its channel mask):
    on ``training_signatures``, its ``get_state`` reading what a checkpoint of the selection reads (with the
    optimizer's slots) and the slots of the other layers unset; with a rate choice, which restores the whole state
    between its runs, ``get_state`` reads everything and every slot is assigned. The model then stands as freshly
    opened (``TrainableModel.reopen``) and reset: the caller sets the head and the learning rate again."""
    model.set_selection(mask)  # the train route and the cut follow from it
    reads = None if config.rate_choice else checkpoint_state_names(model.state_specs, selection, True)
    unset = () if config.rate_choice else model.slot_names(set(model.candidates) - set(selection.layers))
    signatures = training_signatures(model, config, training)
    model.close()
    release_free_memory()  # the first interpreter's arenas and state, before the second is built
    model.reopen(signatures, reads, unset)
    release_free_memory()  # the file's copies read and checked: the state and arenas reuse those pages
    model.reset_state()  # runs nothing on the fresh interpreter of a file whose signatures share one initialiser
