"""Replays the exported test models (``python -m tools.fixtures --out build/test-models``) on
whatever interpreter is installed: ai-edge-litert in the main env, tflite-runtime 2.14 in the Pi env.

Tolerances: the embedded self-test's, per model (``converters.selftest_vectors.measured_tolerances``: at
least 5e-4 for infer/train_step, 1e-3 for state, 2e-3 for fisher, relative). Bit-identity checks are exact.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import fixture_model
from tflite_train.runtime import TrainableModel, read_metadata, read_operator_codes
from tflite_train.runtime.model.selftest import load_selftest, verify

NAMES = ("tiny_adam_33", "tiny_sgd_full_17", "mcunet_adam_35", "mbv2_adam_32", "proxyless_sgd_33")


@pytest.fixture(scope="module", params=NAMES)
def model_path(request) -> pathlib.Path:
    return fixture_model(request.param)


def test_builtin_ops_only(model_path):
    ops = read_operator_codes(model_path)
    assert ops and not [op for op in ops if op.is_custom]
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "IF", "VAR_HANDLE"} <= {op.name for op in ops}


def test_metadata_contract(model_path):
    meta = read_metadata(model_path)
    assert meta["format_version"] == 1
    names = [layer["name"] for layer in meta["layers"]]
    assert meta["candidates"] == [n for n in names if n in meta["candidates"]]
    assert all(layer["candidate"] == (layer["name"] in meta["candidates"]) for layer in meta["layers"])


def test_selftest_passes(model_path):
    result = verify(model_path)
    assert result.passed, result.format()


def test_selftest_detects_perturbed_golden(model_path):
    vectors = load_selftest(model_path)
    key = next(k for k in vectors if k.startswith("fisher/"))
    vectors[key] = vectors[key] * 1.5 + 1e-3
    result = verify(model_path, vectors=vectors)
    assert not result.passed
    assert result.deviation["fisher"] > result.tolerance["fisher"] and result.worst["fisher"] == key


def _trained(path, selection, steps=3, n=4, classes=3):
    model = TrainableModel(path)
    h, w, c = model.input_shape
    rng = np.random.default_rng(1)
    images = rng.uniform(size=(n, h, w, c)).astype(np.float32)
    labels = np.arange(n) % classes
    emb = model.infer(images)["embeddings"]
    model.set_head(np.stack([emb[labels == k].mean(0) for k in range(classes)]))
    before = model.get_state()
    model.set_selection(selection)
    losses = [model.train_step(images, labels)["loss"] for _ in range(steps)]
    return model, before, model.get_state(), losses, images, labels


def test_unselected_layers_and_channels_bit_identical(model_path):
    meta = read_metadata(model_path)
    top, low = meta["candidates"][-1], meta["candidates"][0]
    channels = {layer["name"]: layer["out_channels"] for layer in meta["layers"]}
    groups = {layer["name"]: layer["groups"] for layer in meta["layers"]}
    selection = {top: [0, 2], low: list(range(0, channels[low], 3))}
    model, before, after, losses, _, _ = _trained(model_path, selection)
    assert np.isfinite(losses).all()
    for name in meta["candidates"]:
        for param in ("kernel", "bias"):
            key = f"{name}_{param}"
            b, a = before[key], after[key]
            chosen = np.zeros(channels[name], bool)
            chosen[selection.get(name, [])] = True
            if groups[name] > 1 and param == "kernel":  # depthwise (k, k, C, 1): channel axis 2
                a, b = a[..., 0], b[..., 0]
            np.testing.assert_array_equal(a[..., ~chosen], b[..., ~chosen], err_msg=key)
            if name in selection:
                assert not np.array_equal(a[..., chosen], b[..., chosen]), key


def test_state_roundtrip_and_persistence(model_path):
    meta = read_metadata(model_path)
    top = meta["candidates"][-1]
    model, _, after, losses, images, labels = _trained(model_path, {top: [0, 1, 2]}, steps=2)
    assert losses[1] != losses[0]  # the step changed the selected weights
    snapshot = model.get_state()
    next_loss = model.train_step(images, labels)["loss"]
    model.set_state(snapshot)
    assert model.train_step(images, labels)["loss"] == pytest.approx(next_loss, rel=1e-6)
    model.reset_state()
    state = model.get_state()
    assert int(state["num_classes"]) == 0 and float(state["step"]) == 0.0
    assert not any(state[f"{n}_mask"].any() for n in meta["candidates"])


def test_small_step_descends(model_path):
    """One optimizer step at a moderate learning rate lowers the loss on its own batch.

    The step updates three output channels of the top candidate layer from the initial state. Every
    fixture has embeddings of norm >= 0.01 (MCUNet: the shipped trained weights, ~10; mbv2 /
    proxyless: fan-in-corrected random init, ~15-25; tiny: random init, ~0.02), so some learning
    rate in 1 .. 1e-3 must lower the loss by more than float noise (1e-6). (With the former
    random-init MCUNet, embeddings of norm ~5e-7, only lr ~1e-6 descended.) Adam must descend at the
    exported learning rate itself. At larger rates the loss may rise: ``tiny_sgd_full_17`` (SGD, lr
    0.05) goes 0.718 -> 0.837 -- a TF autodiff reference gives the same 0.8367; the curvature along g
    (~370) makes any lr > ~5e-3 overshoot there.

    For SGD the first step is W -= lr g exactly (zero momentum), so |dW|^2 / lr = lr |g|^2 is the
    first-order decrease: a probe step measures |g|^2, then at the lr whose predicted decrease is
    2e-5 (far above float noise, small enough for the linear regime) the measured decrease must
    match it within 10 % (the second-order term) -- a wrong-sign or wrong-scale gradient fails.
    """
    meta = read_metadata(model_path)
    top = meta["candidates"][-1]
    model = TrainableModel(model_path)
    h, w, c = model.input_shape
    rng = np.random.default_rng(1)
    images = rng.uniform(size=(4, h, w, c)).astype(np.float32)
    labels = np.arange(4) % 3
    emb = model.infer(images)["embeddings"]
    assert np.linalg.norm(emb, axis=1).min() > 1e-2, "degenerate embeddings make the head's gradients ~1/|e|"
    prototypes = np.stack([emb[labels == k].mean(0) for k in range(3)])

    def one_step(lr):
        model.reset_state()
        model.set_head(prototypes)
        model.set_learning_rate(float(lr))
        model.set_selection({top: [0, 1, 2]})
        before = model.get_state()
        loss0 = model.train_step(images, labels)["loss"]
        step_sq = sum(float(np.sum((model.get_state()[f"{top}_{p}"].astype(np.float64) - before[f"{top}_{p}"]) ** 2))
                      for p in ("kernel", "bias"))
        return loss0, model.train_step(images, labels)["loss"], step_sq

    def descends(lr):
        loss0, loss1, _ = one_step(lr)
        return loss0 - loss1 > 1e-6

    assert any(descends(lr) for lr in (1.0, 0.1, 0.01, 1e-3)), "no learning rate in 1 .. 1e-3 lowers the loss"
    optimizer = meta["optimizer"]
    if optimizer["name"] == "adam":
        assert descends(optimizer["learning_rate"]), f"Adam at the exported lr {optimizer['learning_rate']}"
    else:
        probe = 1e-3
        lr = 2e-5 / (one_step(probe)[2] / probe ** 2)  # |g|^2 from the probe's |dW|^2 = lr^2 |g|^2
        loss0, loss1, step_sq = one_step(lr)
        assert loss0 - loss1 == pytest.approx(step_sq / lr, rel=0.10)


def test_variable_batch_and_classes():
    model = TrainableModel(fixture_model("tiny_adam_33"))
    h, w, c = model.input_shape
    rng = np.random.default_rng(2)
    for n, classes in ((1, 1), (5, 4), (2, model.capacity)):
        images = rng.uniform(size=(n, h, w, c)).astype(np.float32)
        model.set_head(rng.normal(size=(classes, model.feature_dim)))
        out = model.infer(images)
        assert out["embeddings"].shape == (n, model.feature_dim) and out["logits"].shape == (n, model.capacity)
        assert (out["logits"][:, classes:] < -1e8).all() and (np.abs(out["logits"][:, :classes]) <= 10.0 + 1e-4).all()
        assert np.isfinite(model.train_step(images, np.arange(n) % classes)["loss"])


def test_boundary_validation():
    model = TrainableModel(fixture_model("tiny_adam_33"))
    h, w, c = model.input_shape
    good = np.zeros((2, h, w, c), np.float32)
    with pytest.raises(ValueError, match="images"):
        model.infer(np.zeros((2, h + 1, w, c), np.float32))
    with pytest.raises(TypeError, match="float32"):
        model.infer(good.astype(np.float64))
    model.set_head(np.ones((2, model.feature_dim)))
    with pytest.raises(ValueError, match="labels"):
        model.train_step(good, np.array([0, 2]))
    with pytest.raises(ValueError, match="capacity"):
        model.set_head(np.ones((model.capacity + 1, model.feature_dim)))
    with pytest.raises(ValueError, match="not a candidate"):
        model.set_selection({"stem": [0]})
    top = model.candidates[-1]
    with pytest.raises(ValueError, match="channels"):
        model.set_selection({top: [model.candidate_channels[top]]})
    with pytest.raises(ValueError, match="channel_mask"):
        model.set_selection(np.full(sum(model.candidate_channels.values()), 0.5, np.float32))


def test_cli_verify_and_ops(tmp_path, capsys):
    import subprocess
    import sys

    from tflite_train.cli import main
    from tflite_train.runtime.model.integrity import seal
    from tflite_train.runtime.model.metadata import SELFTEST_NAME, read_metadata_buffers

    path = fixture_model("tiny_adam_33")
    assert main(["verify", str(path)]) == 0
    assert "PASSED" in capsys.readouterr().out
    assert main(["ops", str(path)]) == 0
    assert "DEPTHWISE_CONV_2D" in capsys.readouterr().out
    # perturb one golden number inside the file: verify must fail, naming the signature
    data = bytearray(path.read_bytes())
    blob = read_metadata_buffers(bytes(data))[SELFTEST_NAME]
    import io
    import zipfile
    vectors = load_selftest(path)
    vectors["infer/logits"] = vectors["infer/logits"] + 0.5
    buf = io.BytesIO()
    np.savez(buf, **vectors)
    assert zipfile.is_zipfile(io.BytesIO(blob))
    start = bytes(data).index(blob)
    if len(buf.getvalue()) == len(blob):
        data[start:start + len(blob)] = buf.getvalue()
        bad = tmp_path / "bad.tflite"
        bad.write_bytes(bytes(data))
        proc = subprocess.run([sys.executable, "-m", "tflite_train.cli", "verify", str(bad)],
                              capture_output=True, text=True)
        assert proc.returncode == 2 and "checksum mismatch" in proc.stderr  # the integrity seal
        bad.write_bytes(seal(bytes(data)))  # an intact file whose numbers are wrong: the self-test's job
        proc = subprocess.run([sys.executable, "-m", "tflite_train.cli", "verify", str(bad)],
                              capture_output=True, text=True)
        assert proc.returncode == 1 and "FAIL infer" in proc.stdout
    else:
        pytest.fail("re-serialised self-test changed size")
    foreign = tmp_path / "foreign.tflite"
    foreign.write_bytes(b"\x00" * 64)
    assert main(["ops", str(foreign)]) == 2
    truncated = tmp_path / "truncated.tflite"
    truncated.write_bytes(bytes(data[:1000]))
    assert main(["verify", str(truncated)]) == 2


def _depth_cuts(meta: dict) -> list[tuple[int, str]]:
    """(lowest index, signature a step runs) of every depth-specific cut: variants and cached cuts."""
    return sorted([(v["lowest_index"], v["signature"]) for v in meta.get("train_variants", [])]
                  + [(c["lowest_index"], c["train_signature"]) for c in meta.get("cached_cuts", [])])


def test_depth_variant_matches_general_train_step(model_path):
    """The depth-specific train step the wrapper picks (a variant, or a cached cut's features +
    train_step_from) equals the general ``train_step`` (rel 1e-5)."""
    meta = read_metadata(model_path)
    assert len(_depth_cuts(meta)) >= 2, "fixtures export with the default train_variants"
    index = {layer["name"]: layer["index"] for layer in meta["layers"]}
    for lowest, signature in _depth_cuts(meta):
        chosen = [n for n in meta["candidates"] if index[n] >= lowest]
        selection = {chosen[0]: [0, 1], chosen[-1]: [1]}
        runs = []
        for general in (False, True):
            model, _, after, losses, images, labels = _trained(model_path, selection, steps=0)
            assert model.train_signature() == signature
            call = (lambda: model.call("train_step", images=images, labels=labels.astype(np.int32))) if general \
                else (lambda: model.train_step(images, labels))
            losses = [float(call()["loss"]) for _ in range(2)]
            runs.append((losses, model.get_state()))
        (loss_v, state_v), (loss_g, state_g) = runs
        np.testing.assert_allclose(loss_v, loss_g, rtol=1e-5)
        for key in state_g:
            np.testing.assert_allclose(state_v[key], state_g[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_wrapper_tracks_selection_for_variants(model_path):
    meta = read_metadata(model_path)
    model = TrainableModel(model_path)
    top, low = meta["candidates"][-1], meta["candidates"][0]
    assert model.train_signature() == "train_step"
    model.set_selection({top: [0]})
    highest = _depth_cuts(meta)[-1][1]
    assert model.train_signature() == highest
    state = model.get_state()
    model.set_selection({low: [0]})
    assert model.train_signature() == (_depth_cuts(meta)[0][1] if _depth_cuts(meta)[0][0] <= min(
        layer["index"] for layer in meta["layers"] if layer["name"] == low) else "train_step")
    model.set_state(state)
    assert model.train_signature() == highest
    model.reset_state()
    assert model.train_signature() == "train_step"
