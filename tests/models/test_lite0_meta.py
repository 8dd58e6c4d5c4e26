"""The shipped meta-trained Lite0: strict loading of the upper-block weights over the ImageNet ones."""

import json
import pathlib

import h5py
import numpy as np
import pytest

from tflite_train.default_weights import LITE0_META_WEIGHTS
from tflite_train.models.efficientnet_lite import WeightsError, build_efficientnet_lite0, read_provenance, split_lite0
from tflite_train.models.lite0_meta import (
    check_embeddings,
    efficientnet_lite0_meta,
    load_meta_weights,
    meta_layers,
    save_meta_weights,
    sidecar,
)

SHA = "ab" * 32
META_WEIGHTS_PATH = pathlib.Path(__file__).resolve().parents[2] / LITE0_META_WEIGHTS
"""The meta-trained weights in the repository (not in the installed package: their path is always given)."""


@pytest.fixture(scope="module")
def shipped():
    return efficientnet_lite0_meta(sidecar(META_WEIGHTS_PATH)["input"]["shape"][0], META_WEIGHTS_PATH)


def test_shipped_weights_load_strictly_and_reproduce_the_stored_embeddings(shipped):
    spec = sidecar(META_WEIGHTS_PATH)
    assert spec["imagenet_source"]["sha256"] == read_provenance()["sha256"]
    assert spec["backbone"] == "lite0" and spec["input"]["normalisation"] == "in-model"
    assert check_embeddings(shipped, spec["reference_embeddings"]) < 1e-3
    with h5py.File(META_WEIGHTS_PATH, "r") as f:  # the file holds exactly the trained tensors
        assert set(f) == {layer.name for layer in meta_layers(shipped, spec["first_block"])}
        assert int(f.attrs["first_block"]) == spec["first_block"]


def test_changed_weights_fail_the_embedding_check(shipped):
    spec = sidecar(META_WEIGHTS_PATH)
    layer = shipped.get_layer("final_bn")
    gamma, beta = layer.gamma.numpy(), layer.beta.numpy()
    try:
        layer.beta.assign(beta + 0.05)
        with pytest.raises(WeightsError, match="not the shipped ones"):
            check_embeddings(shipped, spec["reference_embeddings"])
    finally:
        layer.beta.assign(beta)
        layer.gamma.assign(gamma)


@pytest.fixture()
def saved(tmp_path):
    model = build_efficientnet_lite0(32, include_top=False)
    path = tmp_path / "m.weights.h5"
    save_meta_weights(model, path, first_block=14, imagenet_sha256=SHA)
    return model, path


def test_round_trip_assigns_only_the_trained_tensors(saved):
    model, path = saved
    other = build_efficientnet_lite0(32, include_top=False)
    stem = other.get_layer("stem").kernel.numpy()
    assert load_meta_weights(other, path, imagenet_sha256=SHA) == 14
    for layer in meta_layers(model, 14):
        for a, b in zip(layer.weights, other.get_layer(layer.name).weights):
            if a.name in ("kernel", "gamma", "beta"):
                np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(other.get_layer("stem").kernel.numpy(), stem)  # below first_block: untouched


@pytest.mark.parametrize("tamper, message", [
    (lambda f: f["b14_expand"].__delitem__("kernel"), "b14_expand/kernel is missing"),
    (lambda f: f.__delitem__("final_bn"), "layer 'final_bn' is missing"),
    (lambda f: f.create_group("b03_expand").create_dataset("kernel", data=np.zeros(1, np.float32)), "fit no trained layer"),
    (lambda f: f["final_bn"].create_dataset("extra", data=np.zeros(1, np.float32)), "final_bn/extra fits no variable"),
    (lambda f: (f["final_bn"].__delitem__("beta"), f["final_bn"].create_dataset("beta", data=np.zeros(3, np.float32))),
     "final_bn/beta has shape"),
    (lambda f: (f["final_bn"].__delitem__("beta"), f["final_bn"].create_dataset("beta", data=np.zeros(1280))),
     "not a float32 array"),
    (lambda f: f.attrs.__setitem__("imagenet_sha256", "cd" * 32), "trained from ImageNet weights cdcd"),
])
def test_refuses_files_that_do_not_fit_and_assigns_nothing(saved, tamper, message):
    _, path = saved
    with h5py.File(path, "a") as f:
        tamper(f)
    other = build_efficientnet_lite0(32, include_top=False)
    before = [w.numpy().copy() for w in other.weights]
    with pytest.raises(WeightsError, match=message):
        load_meta_weights(other, path, imagenet_sha256=SHA)
    assert all(np.array_equal(a, w.numpy()) for a, w in zip(before, other.weights))


def test_not_hdf5_is_refused(tmp_path):
    path = tmp_path / "x.weights.h5"
    path.write_bytes(b"PK\x03\x04 not hdf5")
    with pytest.raises(WeightsError, match="not an HDF5 file"):
        load_meta_weights(build_efficientnet_lite0(32, include_top=False), path, imagenet_sha256=SHA)


def test_split_is_the_same_function():
    model = build_efficientnet_lite0(64, include_top=False)
    prefix, upper = split_lite0(model, 10)
    x = np.random.default_rng(0).uniform(0, 255, (2, 64, 64, 3)).astype(np.float32)
    np.testing.assert_allclose(upper(prefix(x)).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="first_block"):
        split_lite0(model, 16)


def _captured_export(monkeypatch, argv):
    import types

    import tflite_train.converters.export
    from tflite_train.cli import main

    seen = {}

    def fake_write_export(config, out, model=None):
        seen["config"] = config
        module = types.SimpleNamespace(config=config, graph=types.SimpleNamespace(feature_layer=None))
        return types.SimpleNamespace(model=b"", metadata={"candidates": []}, module=module)

    monkeypatch.setattr(tflite_train.converters.export, "write_export", fake_write_export)
    assert main(argv) == 0
    return seen["config"]


def test_export_defaults_to_the_shipped_lite0_weights_at_128(monkeypatch, tmp_path):
    """Without flags: Lite0 at 128 px, 6 trainable blocks, the weights ``tflite_train.default_weights`` ships
    (ImageNet-only: weights None, the default head scale); the meta-trained ones by their path."""
    from tflite_train.default_weights import DEFAULT_LITE0_WEIGHTS, IMAGENET

    config = _captured_export(monkeypatch, ["export", "--out", str(tmp_path / "m.tflite")])
    assert config.backbone == "lite0" and config.input_size == (128, 128) and config.candidate_blocks == 6
    assert DEFAULT_LITE0_WEIGHTS == IMAGENET and config.weights is None and config.mean is None  # (x - 127) / 128 in the model
    assert config.cosine_scale == 10.0
    imagenet = _captured_export(monkeypatch, ["export", "--weights", "imagenet", "--input-size", "96", "--out",
                                              str(tmp_path / "i.tflite")])
    assert imagenet.backbone == "lite0" and imagenet.weights is None and imagenet.input_size == (96, 96)
    paper = _captured_export(monkeypatch, ["export", "--backbone", "mcunet", "--out", str(tmp_path / "p.tflite")])
    assert paper.backbone == "mcunet" and paper.input_size == (128, 128) and paper.candidate_blocks == 4
    sidecar_run = _captured_export(monkeypatch, ["export", "--weights", str(META_WEIGHTS_PATH), "--out",
                                                 str(tmp_path / "s.tflite")])
    assert sidecar_run.weights == str(META_WEIGHTS_PATH)
    assert sidecar_run.cosine_scale == pytest.approx(sidecar(META_WEIGHTS_PATH)["cosine_head"]["scale"])
    assert sidecar_run.backbone == "lite0" and sidecar_run.candidate_blocks == 6 and sidecar_run.mean is None


def test_demo_exports_what_export_without_flags_exports(monkeypatch, tmp_path):
    """The demo's model is ``export``'s default: one ``ExportConfig`` (``weights_spec.resolve_export_config``)."""
    import tflite_train.converters.export
    from tflite_train import demo

    seen = {}
    monkeypatch.setattr(tflite_train.converters.export, "ensure_export", lambda config, path: seen.update(config=config))
    path = demo._export(demo.DemoConfig(out=str(tmp_path)))
    cli = _captured_export(monkeypatch, ["export", "--out", str(tmp_path / "m.tflite")])
    assert seen["config"] == cli and path == tmp_path / "lite0_128.tflite"
