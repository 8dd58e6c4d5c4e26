"""Issue 25: a damaged embedded artefact (self-test, metadata) gets the same one-line refusal in every command.

Before, ``verify`` opened the self-test archive before checking the model's seal, so a damaged archive
ended in a ``zipfile.BadZipFile`` traceback while ``adapt`` refused the same file cleanly. Now every
command checks the seal first (one line: "checksum mismatch"), and a self-test or metadata that was
crafted and re-sealed is refused by its schema, in one line naming what is wrong, before any value is
used.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from tests.runtime.crafted_files import metadata_of, model_bytes, with_metadata_text, with_selftest, write
from tests.runtime.runtime_fixtures import assert_one_line_error, run_cli, write_episode_folders
from tflite_train import contract as C
from tflite_train.runtime.model.metadata import metadata_spans, read_metadata
from tflite_train.runtime.model.selftest import load_selftest, verify
from tflite_train.runtime.model.selftest_schema import SelftestError

pytestmark = pytest.mark.pi


@pytest.fixture(scope="module")
def support(tmp_path_factory, fashion):
    root = tmp_path_factory.mktemp("support")
    folder, _ = write_episode_folders(fashion, root, ways=2, shots=2, queries=1)
    return folder


def _commands(path, support, tmp_path):
    ckpt = write(tmp_path / "any.ckpt", b"not read: the model is refused first")
    image = tmp_path / "x.npy"
    np.save(image, np.zeros((8, 8, 3), np.uint8))
    return {
        "verify": ["verify", str(path)],
        "adapt": ["adapt", "--model", str(path), "--support", str(support), "--out", str(tmp_path / "o.ckpt"),
                  "--iterations", "1", "--quiet"],
        "predict": ["predict", "--model", str(path), "--checkpoint", str(ckpt), str(image)],
        "ops": ["ops", str(path)],
    }


def _damaged(entry: str) -> bytes:
    data = bytearray(model_bytes())
    start, n = metadata_spans(bytes(data))[entry]
    for offset in (0, n // 2, n - 1):  # the zip's local header, its middle, its central directory
        data[start + offset] ^= 0x5A
    return bytes(data)


@pytest.mark.parametrize("entry", [C.SELFTEST_NAME, C.METADATA_NAME])
def test_damaged_entry_same_refusal_in_every_command(tmp_path, capsys, support, no_interpreter, entry):
    path = write(tmp_path / "damaged.tflite", _damaged(entry))
    errors = {}
    for name, argv in _commands(path, support, tmp_path).items():
        capsys.readouterr()
        assert run_cli(argv) == 2, name
        err = capsys.readouterr().err
        assert_one_line_error(err, "damaged.tflite: checksum mismatch: the file is corrupted or was modified after export")
        errors[name] = err.split(": error: ", 1)[1]
    assert len(set(errors.values())) == 1, errors
    assert not (tmp_path / "o.ckpt").exists()


def _archive(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def _valid_vectors() -> dict[str, np.ndarray]:
    return load_selftest(model_bytes())


CRAFTED_SELFTESTS = {
    "not a zip": (lambda v: b"PK\x03\x04" + b"\0" * 100, "embedded self-test is damaged: "),
    "a pickled member": (lambda v: _archive(steps=np.array([object()], dtype=object)), "embedded self-test is damaged"),
    "no labels": (lambda v: _archive(**{k: a for k, a in v.items() if k != C.LABELS}), "it has no 'labels' array"),
    "a billion steps": (lambda v: _archive(**{**v, "steps": np.int64(10**9)}), "'steps' is 1000000000"),
    "wrong image shape": (lambda v: _archive(**{**v, "image_shape": np.array([2, 9, 9, 3], np.int32)}),
                          "'image_shape' is \\[2, 9, 9, 3\\]"),
    "prototypes of another width": (lambda v: _archive(**{**v, C.PROTOTYPES: np.zeros((2, 5), np.float32)}),
                                    "'prototypes' is float32 \\[2, 5\\]"),
    "labels out of range": (lambda v: _archive(**{**v, C.LABELS: np.full_like(v[C.LABELS], 99)}), "'labels' must be in"),
    "a golden for no state": (lambda v: _archive(**{**v, "state/bogus": np.zeros(3, np.float32)}),
                              "'state/bogus' names no state variable"),
    "nan tolerance": (lambda v: _archive(**{**v, "tolerance/infer": np.float32(np.nan)}), "'tolerance/infer' holds NaN"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED_SELFTESTS))
def test_crafted_resealed_selftest_is_refused(tmp_path, capsys, case):
    make, pattern = CRAFTED_SELFTESTS[case]
    path = write(tmp_path / "crafted.tflite", with_selftest(model_bytes(), make(_valid_vectors())))
    with pytest.raises(SelftestError, match=pattern):
        verify(path)
    capsys.readouterr()
    assert run_cli(["verify", str(path)]) == 2
    assert_one_line_error(capsys.readouterr().err, "crafted.tflite: embedded self-test is damaged")


def test_valid_selftest_rewritten_in_place_still_passes(tmp_path):
    vectors = _valid_vectors()
    path = write(tmp_path / "same.tflite", with_selftest(model_bytes(), _archive(**vectors)))
    assert verify(path).passed


def test_resealed_metadata_that_is_not_json_same_line_in_every_command(tmp_path, capsys, support, no_interpreter):
    path = write(tmp_path / "meta.tflite", with_metadata_text(model_bytes(), b'{"format": "tflite-train", '))
    for name, argv in _commands(path, support, tmp_path).items():
        if name == "ops":  # lists the operators of any intact flatbuffer: the metadata is not read
            continue
        capsys.readouterr()
        assert run_cli(argv) == 2, name
        assert_one_line_error(capsys.readouterr().err, "'tflite_train' metadata is not UTF-8 JSON")


def test_metadata_with_a_duplicate_key_is_refused_in_one_line(tmp_path, capsys, support, no_interpreter):
    """``json.loads`` keeps the last of two equal keys, the Java core refuses the file: the runtime refuses it too,
    here with a forged ``format`` before the real one (which the last-wins reading would have accepted)."""
    meta = {k: v for k, v in metadata_of(model_bytes()).items() if k != C.F_CONFIG}
    text = '{"%s": "forged", ' % C.F_FORMAT + json.dumps(meta)[1:]
    path = write(tmp_path / "dup.tflite", with_metadata_text(model_bytes(), text.encode()))
    expected = f"'{C.METADATA_NAME}' metadata is not strict JSON: duplicate key '{C.F_FORMAT}'"
    with pytest.raises(C.ContractError) as info:
        read_metadata(path)
    assert str(info.value) == f"{path}: {expected}"
    for name, argv in _commands(path, support, tmp_path).items():
        if name == "ops":  # lists the operators of any intact flatbuffer: the metadata is not read
            continue
        capsys.readouterr()
        assert run_cli(argv) == 2, name
        assert_one_line_error(capsys.readouterr().err, f"{path}: {expected}")
