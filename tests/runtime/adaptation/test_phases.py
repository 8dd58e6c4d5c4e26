"""``adapt`` on phase-scoped interpreters (issue 43): the command opens what the selection calls, then
``adapt(..., reopen=True)`` reopens the model on what the training, the evaluation and the checkpoint call
(``TrainableModel.reopen``, ``phases.training_signatures``), its ``get_state`` reading only the checkpoint's
variables (``signature_subset.keep_state_outputs``).

Parity: the same losses, selection, adapted state (every variable the reopened model reads; with a rate choice,
which reads them all, the whole state) and query logits as the run on one whole model, bit for bit. The guard
keeps the lean path lean: the command's training model opens only the signatures of the chosen cut, no Fisher
pass, no other cut, no full train step, reads no optimizer slot of an unselected layer and assigns none
(``TrainableModel.unset_state``; the selection's model assigns no slot at all). No memory or timing
is asserted here (``bench/memory_profile.py`` measures them).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import episode_arrays, fixture_model, write_episode_folders
from tflite_train import contract as C
from tflite_train.runtime import AdaptConfig, TrainableModel, adapt
from tflite_train.runtime.adapt_job import run_adaptation
from tflite_train.runtime.adaptation.phases import SELECTION_SIGNATURES
from tflite_train.runtime.checkpoint.checkpoint import checkpoint_state_names, load_checkpoint
from tflite_train.runtime.model import interpreter

pytestmark = pytest.mark.pi

FAST = dict(policy="tinytrain", memory_bytes=float("inf"), compute_fraction=None, iterations=6, batch_size=2,
            augment_views=2)


def _run(fashion, name, config, reopen):
    model = TrainableModel(fixture_model(name), signatures=SELECTION_SIGNATURES if reopen else None,
                           unset_state=TrainableModel.slot_names if reopen else None)  # as the command opens it
    low, high = model.metadata[C.F_INPUT][C.F_RANGE]
    xs, ys, xq, _ = episode_arrays(fashion, model.input_shape, ways=3, shots=3, queries=4, seed=5,
                                   value_range=(low, high))
    result = adapt(model, xs, ys, config, reopen=reopen)
    return model, result, model.infer(xq)[C.LOGITS]


@pytest.mark.parametrize("name,config", [
    ("tiny_adam_33", AdaptConfig(**FAST)),
    ("tiny_adam_33", AdaptConfig(**FAST, prototype_mode="refresh", rate_choice=(0.0, 1e-3, 1e-2))),
    ("mcunet_adam_35", AdaptConfig(**FAST)),
], ids=["fixed", "rate-choice", "mcunet"])
def test_the_reopened_run_adapts_bit_for_bit_as_the_whole_model(fashion, name, config):
    whole, want, want_logits = _run(fashion, name, config, reopen=False)
    lean, got, got_logits = _run(fashion, name, config, reopen=True)
    assert got.selection.layers, "the test needs a selection to train"
    assert lean.signatures is not None and C.FISHER not in lean.signatures, "adapt did not reopen the model"
    assert (got.selection, got.losses, got.accuracies) == (want.selection, want.losses, want.accuracies)
    assert "reopen" in got.seconds and "reopen" not in want.seconds
    names = sorted(lean.state_outputs or whole.state_specs)
    if config.rate_choice:
        assert lean.state_outputs is None  # the choice restores the whole state between its runs
    got_state, want_state = lean.get_state(names), whole.get_state(names)
    for key in names:
        np.testing.assert_array_equal(got_state[key], want_state[key], err_msg=key)
    np.testing.assert_array_equal(got_logits, want_logits)


@pytest.fixture()
def opened(monkeypatch):
    """Every interpreter a TrainableModel built in the test: [model, signatures, state outputs, calls]."""
    opens: list[list] = []
    build, call = interpreter.TrainableModel._open, interpreter.TrainableModel.call

    def spy_open(self, content):
        build(self, content)
        opens.append([self, self.signatures, self.state_outputs, [], self.unset_state])

    def spy_call(self, signature, **inputs):
        next(o for o in reversed(opens) if o[0] is self)[3].append(signature)
        return call(self, signature, **inputs)

    monkeypatch.setattr(interpreter.TrainableModel, "_open", spy_open)
    monkeypatch.setattr(interpreter.TrainableModel, "call", spy_call)
    return opens


def test_the_command_trains_on_only_the_chosen_cuts_signatures(fashion, tmp_path, opened):
    support, query = write_episode_folders(fashion, tmp_path / "data", ways=3, shots=3, queries=2, seed=3)
    out = tmp_path / "run.ckpt"
    config = AdaptConfig(**{**FAST, "memory_bytes": float(2**20), "compute_fraction": 0.15})  # some layers
    report = run_adaptation(fixture_model("tiny_adam_33"), support, out, config, query_dir=query)
    assert [o[0] for o in opened] == [opened[0][0]] * 2, "adapt built other than one model opened twice"
    (model, first, first_reads, first_calls, first_unset), (_, second, reads, calls, unset) = opened
    assert first == set(SELECTION_SIGNATURES)
    assert first_unset == model.slot_names(), "the selection's model assigned optimizer slots"
    assert first_reads == set(model.state_specs) - first_unset
    assert set(first_calls) <= first
    assert C.RESET_STATE not in first_calls, "the untouched model's state is the exported one: nothing to reset"
    cut = report["cache"]["layer"]
    cuts = {c.layer: c for c in model.cached_cuts}
    assert report["cache"]["used"] and cut in cuts
    others = {name for c in model.cached_cuts if c.layer != cut
              for name in (c.features, c.train_step, c.infer, c.episode_signature, c.accumulate_signature)}
    assert {cuts[cut].features, cuts[cut].train_step} <= second
    assert not second & (others | {C.FISHER, C.TRAIN_STEP, C.SET_STATE}), sorted(second)
    assert C.RESET_STATE not in calls, "the fresh interpreter's state is the exported one: nothing to reset"
    selection = load_checkpoint(out).selection
    assert reads == set(checkpoint_state_names(model.state_specs, selection, include_optimizer=True))
    unselected = [n for n in model.candidates if n not in selection.channels]
    assert unselected and not any(key.startswith(tuple(f"{n}_" for n in unselected)) for key in reads)
    assert unset == model.slot_names(unselected), "the training model assigned the slots of a layer it does not train"


def test_a_fresh_lean_model_starts_in_the_state_reset_state_restores():
    """The first call's initialiser assigns what ``reset_state`` assigns, so a lean model's first reset runs
    nothing; the whole model (not edited, so not known to start that way) still runs it."""
    for name in ("tiny_adam_33", "tiny_sgd_full_17", "mcunet_adam_35"):
        path = fixture_model(name)
        fresh = TrainableModel(path, signatures=(C.RESET_STATE, C.GET_STATE, C.SET_HEAD))
        fresh.reset_state()
        whole = TrainableModel(path)
        whole.set_head(np.ones((2, whole.feature_dim), np.float32))
        whole.reset_state()
        got, want = fresh.get_state(), whole.get_state()
        assert fresh.num_classes == whole.num_classes == 0
        for key, value in want.items():
            np.testing.assert_array_equal(got[key], value, err_msg=f"{name} {key}")


def test_reopen_refuses_a_file_that_changed(tmp_path):
    path = tmp_path / "model.tflite"
    shutil.copyfile(fixture_model("tiny_adam_33"), path)
    model = TrainableModel(path, signatures=SELECTION_SIGNATURES)
    shutil.copyfile(fixture_model("tiny_sgd_full_17"), path)
    with pytest.raises(ValueError, match="changed since it was opened"):
        model.reopen([C.INFER])
    with pytest.raises(ValueError, match="was closed"):
        model.infer(np.zeros((1, *model.input_shape), np.float32))
