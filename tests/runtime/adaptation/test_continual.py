"""``adapt --from`` (issue 42): a run continues from a checkpoint's state and classes, adds new classes and new
images of known ones, trains on the checkpoint's replay memory, and writes a NEW checkpoint; the old file is never
written, also when the run fails or is killed. Tiny fixture model, real Fashion-MNIST images, a few epochs."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import (
    adapt_cli, assert_one_line_error, checkout_env, fixture_model, snapshot, write_episode_folders,
)
from tflite_train import contract as C
from tflite_train.runtime.adaptation.adapt_config import AdaptConfig
from tflite_train.runtime.adaptation.continual import checkpoint_after, continue_from, merged_class_names, saved_selection
from tflite_train.runtime.adaptation.fine_tuning import embed
from tflite_train.runtime.adaptation.prediction import evaluate
from tflite_train.runtime.adaptation.trainer import adapt
from tflite_train.runtime.checkpoint.checkpoint import decode_checkpoint, load_checkpoint, restore_checkpoint
from tflite_train.runtime.model.interpreter import TrainableModel
from tflite_train.runtime.model.model_contract import layer_table
from tflite_train.runtime.output_lock import lock_path
from tflite_train.sparse.selection import Selection

pytestmark = pytest.mark.pi
MODEL = "tiny_adam_33"


@pytest.fixture()
def lineage(fashion, tmp_path):
    """(first support folder: class0..class2, second: class3 and 2 more images of class1, run folder with the
    first run's ``one.ckpt``)."""
    data, _ = write_episode_folders(fashion, tmp_path / "data", ways=4, shots=4, queries=1, seed=7)
    first, second = tmp_path / "first", tmp_path / "second"
    for k in range(3):
        shutil.copytree(data / f"class{k}", first / f"class{k}")
    shutil.copytree(data / "class3", second / "class3")
    (second / "class1").mkdir()
    for path in sorted((data / "class1").iterdir())[:2]:
        shutil.copy(path, second / "class1" / ("new_" + path.name))
    run = tmp_path / "run"
    run.mkdir()
    assert adapt_cli(first, run / "one.ckpt", "--epochs", "2") == 0
    return first, second, run


def test_adding_a_class_keeps_the_old_classes_names_order_and_prototypes(lineage, capsys):
    _, second, run = lineage
    old = load_checkpoint(run / "one.ckpt")
    assert old.class_names == ("class0", "class1", "class2") and old.replay is not None
    capsys.readouterr()
    assert adapt_cli(second, run / "two.ckpt", "--from", str(run / "one.ckpt"), "--epochs", "2", "--json") == 0
    new = load_checkpoint(run / "two.ckpt")
    assert new.class_names == ("class0", "class1", "class2", "class3")
    assert int(new.arrays[C.NUM_CLASSES]) == 4 and new.arrays[C.PROTOTYPES].shape[0] == 4
    report = new.report
    assert report["shots"] == [0, 2, 0, 4]
    assert report["continued_from"]["new_classes"] == ["class3"]
    # the replay memory: the old rows (at the old cut) and the new images, every class of the head
    assert new.replay.cut_layer == old.replay.cut_layer
    assert new.replay.class_counts(4) == [4, 6, 4, 4]  # the 1 MiB default holds them all: 12 old + 6 new
    assert report["replay_memory"]["examples"] == 18
    # with the plain view of each image, the views its run trained on: every one of them, the budget holds them all
    views = AdaptConfig().augment_views
    assert old.replay.further_views().tolist() == [views] * 12 and len(old.replay) == 12 * (1 + views)
    assert new.replay.further_views().tolist() == [views] * 18 and report["replay_memory"]["rows"] == 18 * (1 + views)
    # trained on new and replayed rows: 2 epochs x (6 new + 12 replayed) at batch 1
    assert len(report["losses"]) == 2 * 18
    # every layer it selected lies at or above the memory's cut; the stored selection keeps the old channels
    table = layer_table(TrainableModel(fixture_model(MODEL)).metadata)
    cut_index = old.replay.cut_index
    assert all(table[n].index >= cut_index for n in report["selection"]["channels"])
    for layer, channels in old.selection.channels.items():
        assert set(channels) <= set(new.selection.channels[layer])


def test_budget_zero_keeps_the_stored_prototypes_and_stores_no_memory(lineage):
    _, second, run = lineage
    old = load_checkpoint(run / "one.ckpt")
    assert adapt_cli(second, run / "two.ckpt", "--from", str(run / "one.ckpt"), "--epochs", "2",
                     "--replay-budget", "0") == 0
    new = load_checkpoint(run / "two.ckpt")
    assert new.replay is None and new.report["replay_memory"]["reason"] == "replay budget 0"
    # class0 and class2 have no new image and no replay: their stored prototypes, bit for bit
    for k in (0, 2):
        assert new.arrays[C.PROTOTYPES][k].tobytes() == old.arrays[C.PROTOTYPES][k].tobytes()
    assert len(new.report["losses"]) == 2 * 6  # the new images only
    assert new.report["continued_from"]["selection_from"] is None


def test_the_old_checkpoint_is_unchanged_after_a_failed_run(lineage, capsys):
    first, second, run = lineage
    before = snapshot(run)
    capsys.readouterr()
    assert adapt_cli(second, run / "one.ckpt", "--from", str(run / "one.ckpt")) == 2
    assert_one_line_error(capsys.readouterr().err, "would overwrite the input")
    # a run that fails after reading the checkpoint and the images: a batch larger than the rows
    assert adapt_cli(second, run / "two.ckpt", "--from", str(run / "one.ckpt"), "--batch-size", "100") == 2
    assert_one_line_error(capsys.readouterr().err, "batch size 100 exceeds the 6 support images and 12 replayed")
    # too many classes for the model's capacity (8): 3 old + 6 new
    many = run.parent / "many"
    for k in range(6):
        shutil.copytree(second / "class3", many / f"new{k}")
    assert adapt_cli(many, run / "two.ckpt", "--from", str(run / "one.ckpt")) == 2
    assert_one_line_error(capsys.readouterr().err, "make 9; the model's class capacity is 8")
    assert snapshot(run) == before


def test_the_old_checkpoint_is_unchanged_after_a_killed_run(lineage):
    """SIGKILL while a ``--from`` run trains: the old file as it was, no new checkpoint."""
    _, second, run = lineage
    old = (run / "one.ckpt").read_bytes()
    out = run / "two.ckpt"
    argv = [sys.executable, "-m", "tflite_train.cli", "adapt", "--mem-budget", "unlimited", "--model",
            str(fixture_model(MODEL)), "--support", str(second), "--from", str(run / "one.ckpt"), "--out", str(out),
            "--iterations", "100000", "--quiet"]
    env = checkout_env()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not lock_path(out).exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(1.0)  # into the training that follows the lock
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert (run / "one.ckpt").read_bytes() == old
    assert not out.exists()
    assert {p.name for p in run.iterdir()} <= {"one.ckpt", lock_path(out).name}


def test_a_checkpoint_without_class_names_is_refused(lineage, capsys):
    from tflite_train.runtime.checkpoint.checkpoint import encode_checkpoint

    _, second, run = lineage
    old = load_checkpoint(run / "one.ckpt")
    (run / "anon.ckpt").write_bytes(encode_checkpoint(old.model_id, old.selection, old.arrays, False, ()))
    capsys.readouterr()
    assert adapt_cli(second, run / "two.ckpt", "--from", str(run / "anon.ckpt")) == 2
    assert_one_line_error(capsys.readouterr().err, "anon.ckpt names no classes")


def test_sparse_update_layers_below_the_cut_are_refused(lineage, capsys):
    first, second, run = lineage
    assert adapt_cli(first, run / "last.ckpt", "--policy", "last_layer") == 0  # its cut: the last candidate's
    cut = load_checkpoint(run / "last.ckpt").replay.cut_layer
    model = TrainableModel(fixture_model(MODEL))
    index = {layer.name: layer.index for layer in layer_table(model.metadata)}
    below = [n for n in model.candidates if index[n] < index[cut]]
    assert cut == model.candidates[-1] and below
    capsys.readouterr()
    assert adapt_cli(second, run / "two.ckpt", "--from", str(run / "last.ckpt"), "--policy", "sparse_update",
                     "--sparse-update-layers", below[0]) == 2
    assert_one_line_error(capsys.readouterr().err, f"lie below the replay memory's cut {cut}")
    # the same run without replay may select it
    assert adapt_cli(second, run / "two.ckpt", "--from", str(run / "last.ckpt"), "--policy", "sparse_update",
                     "--sparse-update-layers", below[0], "--replay-budget", "0") == 0


def test_the_default_budget_admits_a_layer_above_the_cut(lineage, capsys):
    """Without --mem-budget the default budget is raised, if need be, to admit one layer the run may select."""
    import json

    from tests.runtime.runtime_fixtures import run_cli

    first, second, run = lineage
    assert adapt_cli(first, run / "last.ckpt", "--policy", "last_layer") == 0  # its memory's cut: final
    capsys.readouterr()
    assert run_cli(["adapt", "--model", str(fixture_model(MODEL)), "--support", str(second), "--from",
                    str(run / "last.ckpt"), "--out", str(run / "two.ckpt"), "--iterations", "3", "--json",
                    "--quiet"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert list(record["selection"]["channels"]) == ["final"] and record["within_budget"]


def test_merged_names_and_saved_selection_by_hand():
    assert merged_class_names(("a", "b", "c"), ("c", "d", "a", "e")) == ("a", "b", "c", "d", "e")
    model = TrainableModel(fixture_model(MODEL))
    table = layer_table(model.metadata)
    first, last = model.candidates[0], model.candidates[-1]
    old = Selection((first, last), {first: (0, 2), last: (1,)}, "tinytrain")
    run = Selection((last,), {last: (1, 4)}, "last_layer")
    union = saved_selection(old, run, table)
    assert union.layers == (first, last) and union.channels == {first: (0, 2), last: (1, 4)}
    assert union.policy == "last_layer"


def _episode(fashion, model, ways, shots, queries, seed):
    from tests.runtime.runtime_fixtures import episode_arrays

    return episode_arrays(fashion, model.input_shape, ways=ways, shots=shots, queries=queries, seed=seed)


def test_drift_without_replay_and_the_memory_that_prevents_it(fashion, capsys):
    """The library path (what a benchmark section calls): N-way, then +1 way from the checkpoint, with and
    without replay. Without replay the old classes' stored prototypes stay where the old backbone put them
    while the backbone moves: the old class means through the new backbone no longer equal them (drift). With
    replay the stored rows re-centre them. Prints the figures (``-s``)."""
    model = TrainableModel(fixture_model(MODEL))
    x, y, qx, qy = _episode(fashion, model, ways=4, shots=5, queries=15, seed=11)
    old_rows, new_rows = y < 3, y == 3
    config = AdaptConfig(epochs=4, memory_bytes=float("inf"), seed=0)
    names = ("a", "b", "c", "d")
    trained = adapt(model, x[old_rows], y[old_rows], config)
    first = checkpoint_after(model, model_selection(model), None, x[old_rows], y[old_rows], names[:3],
                             replay_budget=2**20, seed=0, views=trained.views)
    assert len(first.replay) == first.replay.num_images * (1 + config.augment_views)  # plain + every view
    first = decode_checkpoint(encode(first))
    old_q = qy < 3
    restore_checkpoint(model, first)
    before = evaluate(model, qx[old_q], qy[old_q])
    figures = {}
    for budget in (0, 2**20):
        start, index = continue_from(first, ["d"], use_replay=budget > 0)
        result = adapt(model, x[new_rows], index[np.zeros(new_rows.sum(), np.int32)], config, start=start)
        assert all(layer_table(model.metadata)[n].index >= (start.replay.cut_index if budget else 0)
                   for n in result.selection.layers)
        after_old = evaluate(model, qx[old_q], qy[old_q])
        after_all = evaluate(model, qx, qy)
        head = model.get_state()[C.PROTOTYPES][:3]
        means = np.stack([embed(model, x[old_rows][y[old_rows] == k]).mean(axis=0) for k in range(3)])
        cosine = np.sum(head * means, axis=1) / (np.linalg.norm(head, axis=1) * np.linalg.norm(means, axis=1))
        figures[budget] = (after_old, after_all, float(cosine.min()))
        if budget == 0:  # the stored prototypes, untouched
            assert np.array_equal(head, first.arrays[C.PROTOTYPES])
    print(f"\nold-class query accuracy before the addition {100 * before:.1f} %")
    for budget, (old_acc, all_acc, cos) in figures.items():
        print(f"replay budget {budget}: old classes {100 * old_acc:.1f} %, all classes {100 * all_acc:.1f} %, "
              f"min cosine(stored prototype, old-class mean through the new backbone) {cos:.4f}")
    assert figures[0][2] < 1 - 1e-6, "the backbone did not move: no drift to measure"
    assert figures[2**20][2] > figures[0][2], "replay did not re-centre the old prototypes"


def model_selection(model: TrainableModel) -> Selection:
    """The selection the model's masks hold (what ``adapt`` just selected)."""
    state = model.get_state()
    channels = {n: tuple(np.flatnonzero(state[n + C.MASK_SUFFIX] > 0.5).tolist()) for n in model.candidates}
    channels = {n: c for n, c in channels.items() if c}
    return Selection(tuple(channels), channels, "tinytrain")


def encode(checkpoint) -> bytes:
    from tflite_train.runtime.checkpoint.checkpoint import encode_checkpoint

    return encode_checkpoint(checkpoint.model_id, checkpoint.selection, checkpoint.arrays, False,
                             checkpoint.class_names, replay=checkpoint.replay)
