"""Saving a checkpoint reads only the state it stores: ``TrainableModel.get_state(names)``.

Parity: the named variables equal those of a whole ``get_state`` (bit for bit) on every runner kind the
installed runtime offers: LiteRT's CompiledModel (the other outputs written into one shared scratch buffer,
``compiled_signatures.CompiledRunner.run``) and an ``Interpreter``'s signature runner (the other outputs left
in its arena, ``interpreter.run_reading``). Guard: the save path (``checkpoint_after``, ``save_checkpoint``)
runs ``get_state`` only with the names of the selected layers' variables and the head (no whole-state copy);
no memory figures here (bench/results/MEMORY.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import episode_arrays, fixture_model
from tflite_train import contract as C
from tflite_train.runtime import AdaptConfig, TrainableModel, adapt
from tflite_train.runtime.adaptation.continual import checkpoint_after
from tflite_train.runtime.checkpoint.checkpoint import load_checkpoint, save_checkpoint
from tflite_train.runtime.model import interpreter
from tflite_train.runtime.model.compiled_signatures import CompiledSignatures, compiled_model_available

pytestmark = pytest.mark.pi

CONFIG = AdaptConfig(policy="tinytrain", memory_bytes=float(2**20), compute_fraction=0.5, iterations=4,
                     learning_rate=1e-2)
RUNNERS = [True, False] if compiled_model_available() else [False]
"""weight_cache values: True opens LiteRT's CompiledModel (where installed), False an Interpreter."""


@pytest.fixture(scope="module")
def episode(fashion):
    model = TrainableModel(fixture_model("tiny_adam_33"))
    return episode_arrays(fashion, model.input_shape, ways=3, shots=3, queries=2, seed=11)


@pytest.mark.parametrize("weight_cache", RUNNERS)
def test_named_variables_equal_the_whole_state(episode, weight_cache):
    model = TrainableModel(fixture_model("tiny_adam_33"), weight_cache=weight_cache)
    assert isinstance(model.interpreter, CompiledSignatures) == weight_cache
    xs, ys, _, _ = episode
    result = adapt(model, xs, ys, CONFIG)
    assert result.selection.layers and result.losses, "the test needs a trained state"
    whole = model.get_state()
    layer = result.selection.layers[0]
    names = [C.PROTOTYPES, C.NUM_CLASSES, layer + C.KERNEL_SUFFIX, *(n for n in whole if n.startswith(layer + "_"))]
    for _ in range(2):  # a second run reuses the runner's buffers for these input shapes
        part = model.get_state(names)
        assert sorted(part) == sorted(set(names))
        for name in names:
            np.testing.assert_array_equal(part[name], whole[name], err_msg=name)
            assert part[name].dtype == whole[name].dtype
    np.testing.assert_array_equal(model.get_state()[C.PROTOTYPES], whole[C.PROTOTYPES])  # whole again after a part
    with pytest.raises(ValueError, match="not state variables"):
        model.get_state(["no_such_variable"])


@pytest.mark.parametrize("include_optimizer", [False, True])
def test_the_save_path_reads_only_the_stored_variables(episode, tmp_path, monkeypatch, include_optimizer):
    model = TrainableModel(fixture_model("tiny_adam_33"))
    xs, ys, _, _ = episode
    result = adapt(model, xs, ys, CONFIG)
    whole = model.get_state()
    reads: list[frozenset[str] | None] = []
    call = interpreter.TrainableModel.call

    def spy(self, signature, **kwargs):
        if signature == C.GET_STATE:
            reads.append(kwargs.get("read"))
        return call(self, signature, **kwargs)

    monkeypatch.setattr(interpreter.TrainableModel, "call", spy)
    adapted = checkpoint_after(model, result.selection, None, xs, ys, ("a", "b", "c"), replay_budget=0, seed=0,
                               include_optimizer=include_optimizer)
    path = tmp_path / "m.ckpt"
    save_checkpoint(path, model, adapted.selection, include_optimizer=include_optimizer, arrays=adapted.arrays,
                    class_names=("a", "b", "c"))
    assert reads and None not in reads, "the save path ran a whole get_state"
    selected = set(result.selection.layers)
    for read in reads:
        layers = {n for n in read if n not in (C.PROTOTYPES, C.NUM_CLASSES, C.LEARNING_RATE, C.STEP)}
        assert {n for n in layers if not any(n.startswith(layer + "_") for layer in selected)} == set()
    stored = load_checkpoint(path).arrays
    for layer in selected:  # what was read is what a whole get_state gives
        idx = np.asarray(result.selection.channels[layer])
        kernel = whole[layer + C.KERNEL_SUFFIX]
        axis = 2 if kernel.ndim == 4 and kernel.shape[-1] == 1 and kernel.shape[2] > 1 else kernel.ndim - 1
        np.testing.assert_array_equal(stored[layer + C.KERNEL_SUFFIX], np.take(kernel, idx, axis=axis))
