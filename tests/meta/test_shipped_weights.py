import json

import numpy as np

from tflite_train import cli
from tflite_train.data.cache import DatasetSpec, prepare_cache
from tflite_train.data.dataset import LabeledImages
from tflite_train.models import build_backbone


def _toy(num_classes, per_class, size, seed):
    rng = np.random.default_rng(seed)
    patterns = rng.integers(0, 256, size=(num_classes, 1, size, size, 3))
    images = np.clip(patterns + rng.normal(0, 40, size=(num_classes, per_class, size, size, 3)), 0, 255)
    return LabeledImages(
        images=images.reshape(-1, size, size, 3).astype(np.uint8),
        labels=np.repeat(np.arange(num_classes), per_class).astype(np.int32),
        class_names=tuple(f"c{i}" for i in range(num_classes)),
    )


def test_train_weights_command_end_to_end(tmp_path, capsys):
    specs = (
        DatasetSpec("toysrc", "source", "toy", lambda s: _toy(40, 6, s, 0)),
        DatasetSpec("toytgt", "target", "toy", lambda s: _toy(6, 8, s, 1)),
    )
    prepare_cache(tmp_path / "cache", image_size=32, datasets=specs)
    out = tmp_path / "weights"
    argv = ["train-weights", "--cache", str(tmp_path / "cache"), "--out", str(out), "--backbone", "tiny", "--image-size", "32",
            "--dataset", "toysrc", "--pretrain-steps", "3", "--batch-size", "16", "--episodes", "3", "--ways", "5", "--shots", "2",
            "--queries", "3", "--val-every", "3", "--eval-episodes", "5", "--threads", "1"]
    assert cli.main(argv) == 0
    assert "| toytgt |" in capsys.readouterr().out
    assert (out / "training.png").stat().st_size > 1000
    summary = json.loads((out / "tiny_32_meta.json").read_text())
    assert set(summary["none_policy_accuracy"]["meta_trained"]) == {"toysrc/test", "toytgt"}
    assert summary["cosine_head"]["scale"] > 0
    backbone = build_backbone("tiny", 32)
    backbone.model.load_weights(str(out / "tiny_32_meta.weights.h5"))
    for sub in ("pretrain", "meta"):
        assert json.loads((out / sub / "config.json").read_text())["backbone"] == "tiny"
        assert (out / sub / "log.jsonl").read_text().strip()
    assert cli.main(["evaluate", "--cache", str(tmp_path / "cache"), "--weights", str(out / "tiny_32_meta.weights.h5"),
                     "--backbone", "tiny", "--image-size", "32", "--dataset", "toysrc", "--episodes", "3"]) == 0
