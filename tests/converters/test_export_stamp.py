"""ensure_export reuses an export only while its config AND its code stamp are unchanged."""

import json
import pathlib
import shutil

import pytest

from tflite_train.converters import export as export_module
from tflite_train.converters.export_config import ExportConfig
from tflite_train.converters.export_stamp import ROOT, SOURCES, code_stamp, stamp_path


@pytest.fixture
def fake_export(monkeypatch):
    """Replaces the (minutes-long) conversion by a writer of the same two files; counts the calls."""
    calls = []

    def write_export(config, out, model=None):
        out = pathlib.Path(out)
        calls.append(config)
        out.write_bytes(b"model %d" % len(calls))
        out.with_suffix(out.suffix + ".config.json").write_text(json.dumps(config.to_dict()))

    monkeypatch.setattr(export_module, "write_export", write_export)
    return calls


def test_reused_only_with_the_same_config_and_code_stamp(tmp_path, fake_export, monkeypatch):
    out = tmp_path / "m.tflite"
    config = ExportConfig()
    assert export_module.ensure_export(config, out) is True
    assert stamp_path(out).read_text() == code_stamp(config)
    assert export_module.ensure_export(config, out) is False and len(fake_export) == 1  # current: reused
    assert export_module.ensure_export(ExportConfig(class_capacity=8), out) is True  # other config
    assert len(fake_export) == 2

    # an export made by older code: same config, another stamp -> re-exported, then current again
    stamp_path(out).write_text("0" * 64)
    assert export_module.ensure_export(ExportConfig(class_capacity=8), out) is True
    assert export_module.ensure_export(ExportConfig(class_capacity=8), out) is False
    monkeypatch.setattr(export_module, "code_stamp", lambda config: "changed exporter")
    assert export_module.ensure_export(ExportConfig(class_capacity=8), out) is True
    assert stamp_path(out).read_text() == "changed exporter"
    assert len(fake_export) == 4


def test_an_export_without_a_stamp_is_not_reused(tmp_path, fake_export):
    """Files written before stamps existed (or by a run killed before its stamp) are rebuilt."""
    out = tmp_path / "m.tflite"
    config = ExportConfig()
    out.write_bytes(b"old")
    out.with_suffix(".tflite.config.json").write_text(json.dumps(config.to_dict()))
    assert export_module.ensure_export(config, out) is True
    assert out.read_bytes() == b"model 1"


def test_stamp_covers_sources_weights_and_library_versions(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    for pattern in SOURCES:
        for path in ROOT.glob(pattern):
            target = root / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    weights = tmp_path / "w.weights.h5"
    weights.write_bytes(b"weights v1")
    config = ExportConfig(weights=str(weights))
    base = code_stamp(config, root)
    assert code_stamp(config, root) == base  # deterministic
    assert base == code_stamp(config, ROOT)  # only the listed files count

    source = root / "converters" / "export.py"
    source.write_text(source.read_text() + "\n# changed\n")
    assert code_stamp(config, root) != base
    shutil.copyfile(ROOT / "converters" / "export.py", source)
    assert code_stamp(config, root) == base

    (root / "converters" / "ops" / "new_op.py").write_text("X = 1\n")  # a new source file counts too
    assert code_stamp(config, root) != base
    (root / "converters" / "ops" / "new_op.py").unlink()

    weights.write_bytes(b"weights v2")  # retrained weights behind the same path
    assert code_stamp(config, root) != base
    weights.write_bytes(b"weights v1")
    assert code_stamp(config, root) == base

    from tflite_train.converters import export_stamp

    monkeypatch.setattr(export_stamp, "_package_versions", lambda: ["tensorflow==0.0"])
    assert code_stamp(config, root) != base
