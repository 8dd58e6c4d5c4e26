"""The compact self-test (format 2): seeded inputs regenerated on the device, kernel sketches, the
frozen-channel check, and that a perturbed model or output fails on the installed runtime
(ai-edge-litert in the main env, tflite-runtime 2.14 in the Pi env; every test here is ``pi``)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import fixture_model
from tflite_train.runtime import TrainableModel, read_metadata
from tflite_train.runtime.model.integrity import ModelIntegrityError, seal
from tflite_train.runtime.model.metadata import SELFTEST_NAME, read_metadata_buffers
from tflite_train.runtime.model.selftest import (
    SELFTEST_FORMAT_VERSION,
    channel_axis,
    kernel_sketch,
    load_selftest,
    selftest_images,
    verify,
)

NAMES = ("tiny_adam_33", "mcunet_adam_35")
MAX_SELFTEST_SHARE = 0.05


@pytest.fixture(scope="module", params=NAMES)
def model_path(request) -> pathlib.Path:
    return fixture_model(request.param)


def test_selftest_images_are_the_same_under_numpy_1_and_2():
    # values written down by hand from numpy 2.4.6's PCG64 stream; the Pi env (numpy 1.26) must match
    got = selftest_images(7, (1, 2, 2, 1), (0.0, 1.0)).ravel()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.array([0.6250954866409302, 0.8972138166427612, 0.7756856679916382,
                                                 0.22520719468593597], np.float32))
    scaled = selftest_images(7, (1, 2, 2, 1), (-2.0, 2.0)).ravel()
    np.testing.assert_allclose(scaled, 4.0 * got.astype(np.float64) - 2.0, rtol=1e-6)


def test_kernel_sketch_is_a_seeded_projection_per_output_channel():
    r = np.random.default_rng([7, *b"k"]).uniform(-1.0, 1.0, (4,))
    np.testing.assert_allclose(r, [0.17178766196991768, 0.8618242739929685, 0.8344812435171594, -0.9233290437260482])
    kernel = np.arange(2 * 3, dtype=np.float32).reshape(2, 3)  # [fan_in 2, channels 3]
    r = np.random.default_rng([5, *b"w"]).uniform(-1.0, 1.0, kernel.shape)
    np.testing.assert_allclose(kernel_sketch(kernel, 3, 5, "w"), (kernel * r).sum(axis=0))
    # a change of one weight of channel 1 moves only s_1
    bumped = kernel.copy()
    bumped[0, 1] += 1.0
    delta = kernel_sketch(bumped, 3, 5, "w") - kernel_sketch(kernel, 3, 5, "w")
    np.testing.assert_allclose(delta, [0.0, r[0, 1], 0.0], atol=1e-12)
    assert channel_axis((3, 3, 8, 1), 8) == 2 and channel_axis((1, 1, 16, 16), 16) == 3
    with pytest.raises(ValueError, match="no axis of 5 channels"):
        channel_axis((3, 3, 8, 1), 5)


def test_selftest_is_compact_and_regenerates_its_images(model_path):
    vectors = load_selftest(model_path)
    assert int(vectors["format_version"]) == SELFTEST_FORMAT_VERSION
    assert "images" not in vectors
    meta = read_metadata(model_path)
    inp = meta["input"]
    assert tuple(vectors["image_shape"][1:]) == (inp["height"], inp["width"], inp["channels"])
    channels = {layer["name"]: layer["out_channels"] for layer in meta["layers"]}
    for name in meta["candidates"]:
        assert vectors[f"state/{name}_kernel"].shape == (channels[name],)
    blob = read_metadata_buffers(model_path)[SELFTEST_NAME]
    share = len(blob) / model_path.stat().st_size
    assert share <= MAX_SELFTEST_SHARE, f"self-test is {len(blob)} of {model_path.stat().st_size} bytes"


def test_selftest_catches_a_perturbed_weight_in_the_model_bytes(model_path, tmp_path):
    """One weight of the top candidate's initial kernel changed inside the .tflite file: verify fails."""
    meta = read_metadata(model_path)
    top = meta["candidates"][-1]
    kernel = TrainableModel(model_path).get_state()[f"{top}_kernel"]
    data = model_path.read_bytes()
    # stored once, in the Keras layout or in the forward op's filter layout (converters.transposed_initial_values)
    layouts = [kernel] + [np.transpose(kernel, perm) for perm in [(3, 0, 1, 2), (1, 0)] if len(perm) == kernel.ndim]
    stored = [a for a in layouts if np.ascontiguousarray(a, np.float32).tobytes() in data]
    assert stored
    original = np.ascontiguousarray(stored[0], np.float32).tobytes()
    flat = stored[0].astype(np.float32).ravel().copy()
    i = int(np.argmax(np.abs(flat)))
    flat[i] = -3.0 * flat[i]
    bad = tmp_path / "perturbed.tflite"
    bad.write_bytes(data.replace(original, flat.tobytes()))
    with pytest.raises(ModelIntegrityError):  # the seal refuses the modified file first...
        TrainableModel(bad)
    bad.write_bytes(seal(bad.read_bytes()))  # ...re-sealed, the self-test must catch the wrong weight
    changed = TrainableModel(bad).get_state()[f"{top}_kernel"] != kernel
    assert int(np.count_nonzero(changed)) == 1
    result = verify(bad)
    assert not result.passed, result.format()
    failed = {g for g in result.deviation if result.deviation[g] > result.tolerance[g]}
    assert failed & {"infer", "fisher", "train_step", "state"}, result.format()
    assert verify(model_path).passed


@pytest.mark.parametrize("signature,group", [("infer", "infer"), ("train_step", "train_step"), ("get_state", "state"),
                                             ("episode_step_from", "episode"), ("accumulate_from", "accumulate")])
def test_selftest_catches_a_perturbed_signature_output(model_path, monkeypatch, signature, group):
    """A runtime whose signature output is off by 1 % fails the group that reads it (the episode and
    accumulation replays too: both fixtures have the episode signatures at their lowest candidate)."""
    real_call = TrainableModel.call
    state = {"train_calls": 0}

    def call(self, name, **inputs):
        out = real_call(self, name, **inputs)
        if name.startswith(signature) and signature != "get_state":
            key = sorted(out)[0]
            out[key] = out[key] * np.float32(1.01) + np.float32(1e-3)
        elif signature == "get_state" and name.startswith("train_step"):
            state["train_calls"] += 1
        elif signature == "get_state" and name == "get_state" and state["train_calls"]:
            bias = f"{read_metadata(model_path)['candidates'][-1]}_bias"
            out[bias] = out[bias] * np.float32(1.01) + np.float32(1e-3)
        return out

    monkeypatch.setattr(TrainableModel, "call", call)
    result = verify(model_path)
    assert not result.passed
    assert result.deviation[group] > result.tolerance[group], result.format()


def test_selftest_catches_a_change_of_an_unselected_channel(model_path, monkeypatch):
    """A train step that moved a channel the mask left out fails the exact ``frozen`` check."""
    real_call = TrainableModel.call
    top = read_metadata(model_path)["candidates"][-1]
    seen = {"train": False}

    def call(self, name, **inputs):
        out = real_call(self, name, **inputs)
        if name.startswith("train_step"):
            seen["train"] = True
        if name == "get_state" and seen["train"]:
            bias = out[f"{top}_bias"].copy()
            bias[1] += np.float32(1e-6)  # the self-test selects every other channel: 1 is unselected
            out[f"{top}_bias"] = bias
        return out

    monkeypatch.setattr(TrainableModel, "call", call)
    result = verify(model_path)
    assert not result.passed
    assert result.deviation["frozen"] > 0.0 and result.worst["frozen"] == f"frozen/{top}_bias"
