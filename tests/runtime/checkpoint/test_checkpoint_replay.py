"""The checkpoint's optional replay section (issue 42, CONTRACT.md "Checkpoint format"): it round-trips bit for
bit, an older checkpoint without it still loads, and bad or foreign replay data is refused in one line naming the
field, before any interpreter call uses it."""

from __future__ import annotations

import copy
import hashlib

import numpy as np
import pytest

from tests.runtime.crafted_files import model, replay_parts  # noqa: F401 (fixtures)
from tests.runtime.crafted_files import adapted_checkpoint, replay_checkpoint, resealed_checkpoint, split_checkpoint
from tests.runtime.runtime_fixtures import assert_one_line_error, fixture_model, run_cli
from tflite_train import contract as C
from tflite_train.runtime.checkpoint.checkpoint import (decode_checkpoint, encode_checkpoint, load_checkpoint,
                                                        restore_checkpoint, save_checkpoint)
from tflite_train.runtime.errors import CheckpointError
from tools.golden.checkpoint_vectors import one_view_checkpoint

pytestmark = pytest.mark.pi


def test_replay_round_trips_bit_for_bit(model, tmp_path):
    data = replay_checkpoint(model)
    checkpoint = decode_checkpoint(data)
    memory = checkpoint.replay
    header, _ = split_checkpoint(data)
    assert header[C.CK_REPLAY][C.RP_CUT_LAYER] == model.cached_cuts[0].layer and len(memory) == 5
    assert C.REPLAY_ACTIVATIONS not in checkpoint.arrays, "replay arrays are not state arrays"
    # the stored floats, including their bit patterns (a seeded normal sample), come back unchanged
    rng = np.random.default_rng(42)
    expected = rng.normal(size=(5, *model.cached_cuts[0].shape)).astype(np.float32)
    assert memory.activations.tobytes() == expected.tobytes()
    assert memory.labels.tolist() == [0, 1, 2, 0, 1] and memory.labels.dtype == np.int32
    # re-encoding the parsed checkpoint gives the same bytes, and so does a save/load through a file
    again = encode_checkpoint(checkpoint.model_id, checkpoint.selection, checkpoint.arrays, False,
                              checkpoint.class_names, replay=memory)
    assert again == data
    layer = model.candidates[-1]
    model.reset_state()
    model.set_head(checkpoint.arrays[C.PROTOTYPES])
    model.set_selection({layer: [0, 3, 5]})
    save_checkpoint(tmp_path / "r.ckpt", model, checkpoint.selection, class_names=checkpoint.class_names,
                    replay=memory)
    loaded = load_checkpoint(tmp_path / "r.ckpt").replay
    assert loaded.activations.tobytes() == memory.activations.tobytes()
    assert loaded.labels.tobytes() == memory.labels.tobytes() and loaded.section() == memory.section()
    restore_checkpoint(model, load_checkpoint(tmp_path / "r.ckpt"))  # the replay arrays are not written into the state
    assert model.get_state()[C.NUM_CLASSES] == 3
    model.reset_state()


MULTI_VIEW = (0, 1, 2, 3, 0, 0, 2, 3)
"""Rows -> images of a memory of 4 images: their plain views, then 2 further views of image 0 and 1 of 2 and 3."""


def test_a_multi_view_memory_round_trips_bit_for_bit(model, tmp_path):
    data = replay_checkpoint(model, rows=8, images=MULTI_VIEW)
    header, _ = split_checkpoint(data)
    assert header[C.CK_REPLAY][C.F_FORMAT_VERSION] == 2
    assert _array(header, C.REPLAY_IMAGES)[C.CK_SHAPE] == [8]
    memory = decode_checkpoint(data).replay
    expected = np.random.default_rng(42).normal(size=(8, *model.cached_cuts[0].shape)).astype(np.float32)
    assert memory.activations.tobytes() == expected.tobytes()
    assert memory.images.tolist() == list(MULTI_VIEW) and memory.labels.tolist() == [0, 1, 2, 0, 0, 0, 2, 0]
    assert memory.num_images == 4 and memory.further_views().tolist() == [2, 0, 1, 1]
    checkpoint = decode_checkpoint(data)
    assert encode_checkpoint(checkpoint.model_id, checkpoint.selection, checkpoint.arrays, False,
                             checkpoint.class_names, replay=memory) == data
    (tmp_path / "m.ckpt").write_bytes(data)
    loaded = load_checkpoint(tmp_path / "m.ckpt").replay
    assert loaded.activations.tobytes() == memory.activations.tobytes()
    assert loaded.images.tobytes() == memory.images.tobytes() and loaded.labels.tobytes() == memory.labels.tobytes()


def test_a_one_view_checkpoint_of_replay_version_1_still_loads(model):
    data = replay_checkpoint(model)
    old = one_view_checkpoint(data)  # as the writers of replay version 1 wrote it: no replay_images
    header, _ = split_checkpoint(old)
    assert header[C.CK_REPLAY][C.F_FORMAT_VERSION] == 1
    assert not any(e[C.CK_NAME] == C.REPLAY_IMAGES for e in header[C.CK_ARRAYS])
    memory = decode_checkpoint(old).replay
    new = decode_checkpoint(data).replay
    assert memory.activations.tobytes() == new.activations.tobytes() and memory.labels.tolist() == [0, 1, 2, 0, 1]
    assert memory.images.tolist() == [0, 1, 2, 3, 4] and memory.num_images == 5  # one plain view per row
    restore_checkpoint(model, decode_checkpoint(old))
    assert model.get_state()[C.NUM_CLASSES] == 3
    model.reset_state()


def test_a_checkpoint_without_replay_still_loads(model):
    data = adapted_checkpoint(model)
    header, _ = split_checkpoint(data)
    assert C.CK_REPLAY not in header and not any(e[C.CK_NAME].startswith("replay") for e in header[C.CK_ARRAYS])
    checkpoint = decode_checkpoint(data)
    assert checkpoint.replay is None
    restore_checkpoint(model, checkpoint)
    assert model.get_state()[C.NUM_CLASSES] == 3
    model.reset_state()


def _array(header: dict, name: str) -> dict:
    return next(e for e in header[C.CK_ARRAYS] if e[C.CK_NAME] == name)


def _with_payload(header: dict, payload: bytes, name: str, values: np.ndarray) -> bytes:
    entry = _array(header, name)
    raw = np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<")).tobytes()
    return payload[:entry[C.CK_OFFSET]] + raw + payload[entry[C.CK_OFFSET] + entry[C.CK_NBYTES]:]


def _edit(header, key, value):
    header[C.CK_REPLAY][key] = value


HEADER_CASES = {
    "version": (lambda h: _edit(h, C.F_FORMAT_VERSION, 3), "field replay.format_version: must be in 1..2"),
    "format": (lambda h: _edit(h, C.F_FORMAT, "other"), "field replay.format: must be 'tflite-train-replay'"),
    "rule": (lambda h: _edit(h, C.F_RULE, "reservoir"), "field replay.rule: must be one of class_balanced_recent"),
    "unknown member": (lambda h: _edit(h, "extra", 1), "field replay.extra: is not a known field"),
    "shape": (lambda h: _edit(h, C.RP_ACTIVATION_SHAPE, [9, 9, 13]), "field arrays['replay_activations']: must be "
                                                                       "float32 [R >= 1, 9, 9, 13]"),
    "budget": (lambda h: _edit(h, C.RP_BUDGET_BYTES, 100), "over replay.budget_bytes 100"),
    "no labels": (lambda h: h[C.CK_ARRAYS].remove(_array(h, C.REPLAY_LABELS)),
                  "field arrays: has no 'replay_labels' array for the header field replay"),
    "labels shape": (lambda h: _array(h, C.REPLAY_LABELS).update({C.CK_SHAPE: [2, 2], C.CK_NBYTES: 16}),
                     "field arrays['replay_labels']: must be int32 [5]"),
    "arrays without the section": (lambda h: h.pop(C.CK_REPLAY),
                                   "field arrays['replay_activations']: is replay data without the header field replay"),
    "not an object": (lambda h: h.update({C.CK_REPLAY: [1]}), "field replay: must be an object; got a list"),
    "no images in version 2": (lambda h: h[C.CK_ARRAYS].remove(_array(h, C.REPLAY_IMAGES)),
                               "field arrays: has no 'replay_images' array for the header field replay (version 2)"),
    "images in version 1": (lambda h: _edit(h, C.F_FORMAT_VERSION, 1),
                            "field arrays['replay_images']: is not part of a replay section of version 1"),
    "images shape": (lambda h: _array(h, C.REPLAY_IMAGES).update({C.CK_SHAPE: [4], C.CK_NBYTES: 16}),
                     "field arrays['replay_images']: must be int32 [5] (one image per stored activation)"),
}


@pytest.mark.parametrize("case", sorted(HEADER_CASES))
def test_a_bad_replay_header_is_refused_in_one_line(replay_parts, case):
    header, payload = copy.deepcopy(replay_parts[0]), replay_parts[1]
    edit, fragment = HEADER_CASES[case]
    edit(header)
    with pytest.raises(CheckpointError) as err:
        decode_checkpoint(resealed_checkpoint(header, payload), "c.ckpt")
    message = str(err.value)
    assert "\n" not in message and message.startswith("c.ckpt: ") and fragment in message, message


@pytest.mark.parametrize("values,fragment", [
    (np.array([0, 1, 3, 0, 1], np.int32), "'replay_labels' holds class 3; the head has num_classes 3"),
    (np.array([0, -1, 2, 0, 1], np.int32), "'replay_labels' holds class -1"),
])
def test_replay_labels_outside_the_head_are_refused(replay_parts, values, fragment):
    header, payload = replay_parts
    data = resealed_checkpoint(header, _with_payload(header, payload, C.REPLAY_LABELS, values))
    with pytest.raises(CheckpointError, match="c.ckpt: checkpoint array " + fragment.replace("[", r"\[")):
        decode_checkpoint(data, "c.ckpt")


@pytest.mark.parametrize("images,labels,fragment", [
    ([0, 1, 2, 4, 3], None, "'replay_images' must begin with 0, 1, ..., I-1"),
    ([0, 1, 2, 1, 0], None, "'replay_images' must continue with image indices 0..I-1 in ascending order"),
    ([0, 1, 2, 0, 1], [0, 1, 2, 1, 1], "'replay_labels' labels a row unlike its image"),
])
def test_an_inconsistent_row_to_image_index_is_refused(replay_parts, images, labels, fragment):
    header, payload = replay_parts
    payload = _with_payload(header, payload, C.REPLAY_IMAGES, np.array(images, np.int32))
    if labels is not None:
        payload = _with_payload(header, payload, C.REPLAY_LABELS, np.array(labels, np.int32))
    with pytest.raises(CheckpointError) as err:
        decode_checkpoint(resealed_checkpoint(header, payload), "c.ckpt")
    message = str(err.value)
    assert "\n" not in message and message.startswith("c.ckpt: checkpoint array ") and fragment in message, message


def test_non_finite_replay_activations_are_refused(replay_parts, model):
    header, payload = replay_parts
    values = np.zeros((5, *model.cached_cuts[0].shape), np.float32)
    values[3, 0, 0, 0] = np.nan
    data = resealed_checkpoint(header, _with_payload(header, payload, C.REPLAY_ACTIVATIONS, values))
    with pytest.raises(CheckpointError, match="'replay_activations' holds NaN or Inf"):
        decode_checkpoint(data, "c.ckpt")


@pytest.mark.parametrize("key,value,fragment", [
    (C.RP_CUT_LAYER, "b01_expand", "replay.cut_layer: 'b01_expand' is not a cached cut of this model"),
    (C.RP_CUT_INDEX, 7, "replay.cut_index: is 7; layer 'b02_expand' has index 6 in this model"),
])
def test_a_replay_memory_at_a_cut_the_model_lacks_is_refused_before_restoring(replay_parts, model, key, value, fragment):
    header = copy.deepcopy(replay_parts[0])
    header[C.CK_REPLAY][key] = value
    checkpoint = decode_checkpoint(resealed_checkpoint(header, replay_parts[1]), "c.ckpt")  # the schema admits it
    model.reset_state()
    before = {k: v.copy() for k, v in model.get_state().items()}
    with pytest.raises(CheckpointError, match=fragment.replace("'", ".")) as err:
        restore_checkpoint(model, checkpoint)
    assert "\n" not in str(err.value)
    assert all(np.array_equal(before[k], v) for k, v in model.get_state().items()), "the state changed"


def test_an_older_reader_refuses_a_replay_section_in_one_line(replay_parts):
    """What a reader from before the section does (its header schema has no ``replay`` member): one line."""
    from tflite_train.runtime.checkpoint.checkpoint_schema import CHECKPOINT_HEADER
    from tflite_train.runtime.model.header_schema import Object, SchemaError

    older = Object({k: f for k, f in CHECKPOINT_HEADER.fields.items() if k != C.CK_REPLAY})
    with pytest.raises(SchemaError, match="field replay: is not a known field"):
        older.check(replay_parts[0], "")


def test_a_foreign_or_corrupt_replay_checkpoint_is_refused_by_adapt_from(model, tmp_path, capsys, fashion,
                                                                         no_interpreter):
    """``adapt --from`` reads the checkpoint before it opens the model: a corrupt replay section is refused in one
    line before any interpreter exists (``no_interpreter``), and nothing is written."""
    from tests.runtime.runtime_fixtures import snapshot, write_episode_folders

    support, _ = write_episode_folders(fashion, tmp_path / "data", ways=1, shots=2, queries=1, seed=3)
    header, payload = split_checkpoint(replay_checkpoint(model))
    header[C.CK_REPLAY][C.RP_BUDGET_BYTES] = 8
    run = tmp_path / "run"
    run.mkdir()
    (run / "old.ckpt").write_bytes(resealed_checkpoint(header, payload))
    before = snapshot(run)
    capsys.readouterr()
    assert run_cli(["adapt", "--model", str(fixture_model("tiny_adam_33")), "--support", str(support), "--from",
                    str(run / "old.ckpt"), "--out", str(run / "new.ckpt"), "--quiet"]) == 2
    assert_one_line_error(capsys.readouterr().err, "old.ckpt: checkpoint header field arrays['replay_activations']",
                          "over replay.budget_bytes 8")
    assert snapshot(run) == before


def test_a_checkpoint_of_another_model_is_refused_by_adapt_from(tmp_path, capsys, fashion):
    from tests.runtime.runtime_fixtures import snapshot, write_episode_folders
    from tflite_train.runtime.model.interpreter import TrainableModel

    support, _ = write_episode_folders(fashion, tmp_path / "data", ways=1, shots=2, queries=1, seed=3)
    other = TrainableModel(fixture_model("mcunet_adam_35"))
    run = tmp_path / "run"
    run.mkdir()
    (run / "old.ckpt").write_bytes(replay_checkpoint(other))
    before = snapshot(run)
    capsys.readouterr()
    assert run_cli(["adapt", "--model", str(fixture_model("tiny_adam_33")), "--support", str(support), "--from",
                    str(run / "old.ckpt"), "--out", str(run / "new.ckpt"), "--quiet"]) == 2
    assert_one_line_error(capsys.readouterr().err, "checkpoint is for model", "not this model", "refusing to load")
    assert snapshot(run) == before


def test_replay_section_digest_covers_the_activations(model):
    """A flipped bit in a stored activation breaks the digest (the payload is under the sha256)."""
    data = bytearray(replay_checkpoint(model))
    header, _ = split_checkpoint(bytes(data))
    start = len(data) - 32 - header[C.CK_PAYLOAD_BYTES] + _array(header, C.REPLAY_ACTIVATIONS)[C.CK_OFFSET]
    data[start + 5] ^= 0x10
    with pytest.raises(CheckpointError, match="sha256 mismatch"):
        decode_checkpoint(bytes(data), "c.ckpt")
    assert hashlib.sha256(bytes(data[:-32])).digest() != bytes(data[-32:])


def test_encode_refuses_replay_arrays_passed_as_state(model):
    plain = decode_checkpoint(adapted_checkpoint(model))
    arrays = {**plain.arrays, C.REPLAY_LABELS: np.zeros(1, np.int32)}
    with pytest.raises(ValueError, match="replay data"):
        encode_checkpoint(plain.model_id, plain.selection, arrays)
