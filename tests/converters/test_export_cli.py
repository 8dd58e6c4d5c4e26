"""``tflite-train export --keras-model``: refusals before anything is written, the suggested cut,
and the model identity that checkpoints are checked against."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tflite_train.cli import main
from tflite_train.converters import ExportConfig, export_model
from tflite_train.converters.keras_io import ModelFileError, load_keras_model
from tflite_train.runtime import TrainableModel
from tflite_train.runtime.checkpoint.checkpoint import CheckpointError, restore_checkpoint, save_checkpoint
from tflite_train.runtime.model.selftest import verify
from tflite_train.sparse.selection import Selection


def _model_with_layer_norm():
    x = inputs = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu", name="early")(x)
    x = keras.layers.GroupNormalization(groups=2, name="ln_3")(x)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="late")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inputs, keras.layers.Dense(2, name="cls")(x))


def test_unsupported_layer_refused_then_suggested_cut_exports(tmp_path, capsys):
    path = tmp_path / "m.keras"
    _model_with_layer_norm().save(path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "m.tflite"
    assert main(["export", "--keras-model", str(path), "--out", str(out), "--candidates", "all"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tflite-train export: error: layer 'ln_3' (GroupNormalization) has no on-device gradient; "
                   "candidates from 'late' upward would export (--candidates from:late)"]
    assert list(out_dir.iterdir()) == []  # nothing written
    assert main(["export", "--keras-model", str(path), "--out", str(out), "--candidates", "from:late",
                 "--capacity", "4", "--optimizer", "sgd"]) == 0
    assert verify(out).passed  # the frozen GroupNormalization runs as TFLite converts it
    model = TrainableModel(out)
    assert model.candidates == ["late"] and model.metadata["optimizer"]["name"] == "sgd_momentum"
    assert model.metadata["config"]["keras_model"] == str(path)


@pytest.mark.parametrize("content,message", [
    (b"not a zip", "not a .keras archive"),
    (None, "cannot read it"),
])
def test_bad_model_files_are_refused_before_keras_reads_them(tmp_path, content, message):
    path = tmp_path / "m.keras"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ModelFileError, match=message):
        load_keras_model(path)
    with pytest.raises(ModelFileError, match="must end in .keras or .h5"):
        (tmp_path / "m.txt").write_bytes(b"x")
        load_keras_model(tmp_path / "m.txt")


def test_model_id_covers_weights_and_normalisation(tmp_path):
    base = ExportConfig(backbone="tiny", input_size=(17, 17), candidate_blocks=1, class_capacity=4,
                        train_variants=0, selftest_batch=2, episode_signatures=False)  # signatures: not in the id
    variants = {"a": base, "other_weights": ExportConfig(**{**base.__dict__, "seed": 1}),
                "other_norm": ExportConfig(**{**base.__dict__, "mean": (0.5,) * 3, "std": (0.5,) * 3})}
    models = {}
    for name, config in variants.items():
        result = export_model(config)
        (tmp_path / f"{name}.tflite").write_bytes(result.model)
        models[name] = TrainableModel(tmp_path / f"{name}.tflite")
    ids = {name: m.metadata["model_id"] for name, m in models.items()}
    assert len(set(ids.values())) == 3
    first = models["a"]
    first.reset_state()
    first.set_head(np.eye(2, first.feature_dim, dtype=np.float32))
    name = first.candidates[0]
    ckpt = tmp_path / "a.ckpt"
    save_checkpoint(ckpt, first, Selection((name,), {name: (0,)}, "test"))
    restore_checkpoint(first, ckpt)  # its own model takes it
    for other in ("other_weights", "other_norm"):
        with pytest.raises(CheckpointError, match="model"):
            restore_checkpoint(models[other], ckpt)


def test_the_smallest_head_exports_and_verifies(tmp_path):
    """--capacity 2 (the CLI's minimum) with the default 3-image self-test: the self-test uses at most
    ``class_capacity`` classes (it used 3 and the export crashed on the head's shape)."""
    from tflite_train.runtime.model.selftest import verify

    config = ExportConfig(backbone="tiny", input_size=(17, 17), candidate_blocks=1, class_capacity=2, train_variants=0)
    path = tmp_path / "two.tflite"
    path.write_bytes(export_model(config).model)
    result = verify(path)
    assert result.passed, result.format()
