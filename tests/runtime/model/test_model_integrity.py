"""Category 1 of the bad-input set: model files that are not what the exporter wrote are refused
before any interpreter exists (the integrity seal, ``tflite_train.runtime.model.integrity``).

Runs in both environments (in the Pi env on tflite-runtime 2.14): the interpreter class is replaced
by one that fails the test if it is ever constructed.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import fixture_model
from tflite_train.cli import main
from tflite_train.runtime import TrainableModel
from tflite_train.runtime.model.integrity import CHECKSUM_NAME, ModelIntegrityError, check_model_bytes
from tflite_train.runtime.model.metadata import metadata_spans

FIXTURE = "tiny_adam_33"


def _data() -> bytes:
    return fixture_model(FIXTURE).read_bytes()


def test_intact_model_passes():
    check_model_bytes(_data())


@pytest.mark.parametrize("where", [0.01, 0.3, 0.5, 0.9, 0.999])
def test_one_flipped_byte_is_refused_before_the_interpreter(no_interpreter, where):
    data = bytearray(_data())
    position = int(where * (len(data) - 1))
    data[position] ^= 0x01
    with pytest.raises(ModelIntegrityError, match="model bytes"):
        TrainableModel(bytes(data))


@pytest.mark.parametrize("case,content,message", [
    ("truncated", lambda d: d[: len(d) // 2], "truncated or foreign|beyond"),
    ("not a flatbuffer", lambda d: b"PK\x03\x04" + bytes(200), "not a .tflite flatbuffer"),
    ("empty", lambda d: b"", "not a .tflite flatbuffer"),
    ("no seal", lambda d: d.replace(CHECKSUM_NAME.encode(), b"tflite_train_xxxxxxxx"), "no integrity checksum"),
])
def test_damaged_or_foreign_files_are_refused(no_interpreter, case, content, message):
    with pytest.raises(ModelIntegrityError, match=message):
        TrainableModel(content(_data()))


def test_huge_file_refused(no_interpreter, monkeypatch):
    monkeypatch.setattr("tflite_train.runtime.model.integrity.MAX_MODEL_BYTES", 1000)
    with pytest.raises(ModelIntegrityError, match="exceeds"):
        TrainableModel(_data())


def test_the_seal_covers_the_whole_file():
    data = _data()
    start, n = metadata_spans(data)[CHECKSUM_NAME]
    assert n == 64 and all(chr(c) in "0123456789abcdef" for c in data[start:start + n])
    for position in (start - 1, start + n):  # either side of the digest
        damaged = bytearray(data)
        damaged[position] ^= 0x80
        with pytest.raises(ModelIntegrityError):
            check_model_bytes(bytes(damaged))


def test_cli_reports_one_line_and_exit_2(tmp_path, capsys):
    data = bytearray(_data())
    data[len(data) // 3] ^= 0xFF
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(bytes(data))
    assert main(["verify", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.tflite" in err[0] and "checksum mismatch" in err[0]
    assert np.frombuffer(bad.read_bytes(), np.uint8).size == len(data)  # nothing rewritten
