"""Preprocessing outside the network (issue 24): ``export --input-range``, ``--channel-order``,
``--preprocessing``; the metadata that records them; the in-graph channel reverse of a BGR export; the
warning for a ``keras.applications`` family exported without the preprocessing it expects; and that an
export without the new fields is what it was before they existed (config dict, metadata, model id).

Exports are small (32 px CNNs, weights=None, no optional signatures): a few seconds each, one per module.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import subprocess

import keras
import numpy as np
import pytest
from PIL import Image

from tflite_train import contract as C
from tflite_train.cli import main
from tflite_train.cli.model_commands import PREPROCESSING_PRESETS
from tflite_train.converters import ExportConfig, module_from_keras, prepare_model, write_export
from tflite_train.converters.export import build_metadata, model_id
from tflite_train.converters.preprocessing import PRESETS, keras_family, missing_preprocessing_warning, preset_fields
from tflite_train.runtime import TrainableModel, input_range
from tflite_train.runtime.images.model_input import load_images
from tflite_train.runtime.model.model_metadata_schema import check_model_metadata

REPO = pathlib.Path(__file__).resolve().parents[2]
PI_PYTHON = pathlib.Path(os.environ.get("TFLITE_TRAIN_PI_PYTHON", REPO / ".venv-pi" / "bin" / "python"))
FAST = dict(backbone="keras", input_size=None, candidates="layers:2", train_variants=0, cache_signatures=False,
            class_capacity=4)
TOLERANCE = 1e-4
"""Largest |TFLite - Keras| of an embedding, relative to the largest |Keras| entry (float32 through
three convs and BN folding: measured ~1e-6)."""

CONFIG_KEYS_BEFORE = ("backbone", "input_size", "in_channels", "candidate_blocks", "candidates", "feature_layer",
                      "class_capacity", "optimizer", "learning_rate", "beta1", "beta2", "epsilon", "momentum",
                      "cosine_scale", "mean", "std", "input_range", "seed", "weights", "keras_model", "selftest_batch",
                      "train_variants", "cache_signatures", "cache_cuts")
"""``ExportConfig().to_dict()``'s keys, in order, before the channel order existed (cached exports are
found by this dict: it must not change for configs that do not use the new fields)."""
INPUT_KEYS_BEFORE = {C.F_HEIGHT, C.F_WIDTH, C.F_CHANNELS, C.F_DTYPE, C.F_RANGE, C.F_MEAN, C.F_STD,
                     C.F_NORMALISATION_SOURCE}


def small_cnn(name: str = "small_cnn", size: int = 32) -> keras.Model:
    """Three convs (the stem reads each channel differently), BN, global pooling, a classifier."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((size, size, 3))
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same", name="stem")(x)
    x = keras.layers.BatchNormalization(name="stem_bn")(x)
    x = keras.layers.ReLU(name="stem_relu")(x)
    x = keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu", name="mid")(x)
    x = keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="top")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inputs, keras.layers.Dense(5, name="cls")(x), name=name)


def keras_embedding(model: keras.Model, network_input: np.ndarray) -> np.ndarray:
    """The model's ``gap`` output (what the export's ``infer`` returns as embeddings) on its own input."""
    return np.asarray(keras.Model(model.inputs[0], model.get_layer("gap").output)(network_input, training=False))


def keras_preprocess(rgb_0_255: np.ndarray, preset: str) -> np.ndarray:
    """What ``keras.applications`` feeds its network for RGB 0..255 pixels in mode ``preset``."""
    from keras.applications import imagenet_utils

    return np.asarray(imagenet_utils.preprocess_input(rgb_0_255.astype(np.float32).copy(), mode=preset))


def rgb_images(n: int = 3, size: int = 32, seed: int = 0) -> np.ndarray:
    """RGB images in 0..255 whose channels differ strongly (a reversed order is far from the original)."""
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 1, size)[None, :, None, None] * np.array([255.0, 60.0, 10.0])
    return np.clip(ramp + rng.uniform(0, 80, (n, size, size, 3)), 0, 255).astype(np.float32)


# --- the config dict and the metadata of exports that do not use the new fields -------------------------------


def test_default_export_config_dict_is_as_before_the_new_fields():
    assert tuple(ExportConfig().to_dict()) == CONFIG_KEYS_BEFORE
    given = ExportConfig(backbone="keras", input_size=None, mean=(1, 2, 3), std=(2, 2, 2), input_range=(0, 255))
    assert tuple(given.to_dict()) == CONFIG_KEYS_BEFORE
    assert given.to_dict()["input_range"] == [0.0, 255.0]
    explicit_rgb = ExportConfig(channel_order=C.CHANNEL_ORDER_RGB)
    assert explicit_rgb.to_dict() == ExportConfig().to_dict()


def test_bgr_is_recorded_in_the_config_dict_and_round_trips():
    config = ExportConfig(**preset_fields("caffe"))
    d = config.to_dict()
    assert d[C.F_CHANNEL_ORDER] == C.CHANNEL_ORDER_BGR and d["input_range"] == [0.0, 255.0]
    assert ExportConfig(**{**d, "input_size": tuple(d["input_size"])}) == config
    with pytest.raises(ValueError, match="channel_order must be one of"):
        ExportConfig(channel_order="grb")


def test_rgb_metadata_and_model_id_do_not_mention_the_channel_order():
    """Built without converting: the input entry keeps exactly its former keys; BGR changes the model id."""
    model = small_cnn()
    rgb = module_from_keras(model, ExportConfig(**FAST))
    bgr = module_from_keras(model, ExportConfig(**FAST, channel_order=C.CHANNEL_ORDER_BGR))
    assert set(build_metadata(rgb)[C.F_INPUT]) == INPUT_KEYS_BEFORE
    assert C.F_CHANNEL_ORDER not in build_metadata(rgb)[C.F_CONFIG]
    assert build_metadata(bgr)[C.F_INPUT][C.F_CHANNEL_ORDER] == C.CHANNEL_ORDER_BGR
    assert model_id(rgb) != model_id(bgr)


# --- presets -----------------------------------------------------------------------------------------------------


def test_cli_choices_are_the_presets():
    assert PREPROCESSING_PRESETS == tuple(PRESETS)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_each_preset_computes_what_keras_preprocess_input_computes(preset):
    """(reverse if BGR, then (x - mean) / std) on 0..255 RGB = keras' preprocess_input(x, mode), to 1e-5."""
    fields = preset_fields(preset)
    x = rgb_images()
    assert fields["input_range"] == (0.0, 255.0)
    ours = x[..., ::-1] if fields["channel_order"] == C.CHANNEL_ORDER_BGR else x
    ours = (ours - np.float32(fields["mean"])) / np.float32(fields["std"])
    np.testing.assert_allclose(ours, keras_preprocess(x, preset), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name,expected", [
    ("resnet50", ("ResNet50", "caffe")), ("resnet152v2", ("ResNet152V2", "tf")), ("vgg16", ("VGG16", "caffe")),
    ("mobilenet_0.25_224", ("MobileNet", "tf")), ("mobilenetv2_1.00_224", ("MobileNetV2", "tf")),
    ("densenet121", ("DenseNet121", "torch")), ("xception", ("Xception", "tf")),
    ("inception_v3", ("InceptionV3", "tf")), ("inception_resnet_v2", ("InceptionResNetV2", "tf")),
    ("nasnet_mobile", ("NASNetMobile", "tf")), ("NASNet", ("NASNet", "tf")),
    ("efficientnetb0", None), ("MobileNetV3Small", None), ("convnext_tiny", None), ("my_resnet50", None),
    ("sequential", None),
])
def test_keras_family_by_model_name(name, expected):
    assert keras_family(name) == expected


# --- the command line --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flags,message", [
    (["--preprocessing", "caffe", "--mean", "1", "--std", "1"], "--preprocessing caffe sets the input range, mean, "
     "std and channel order; it cannot be combined with --mean"),
    (["--preprocessing", "tf", "--input-range", "0", "1"], "--preprocessing tf sets the input range, mean, std and "
     "channel order; it cannot be combined with --input-range"),
    (["--preprocessing", "torch", "--channel-order", "rgb"], "--preprocessing torch sets the input range, mean, std "
     "and channel order; it cannot be combined with --channel-order"),
    (["--input-range", "1", "0"], "--input-range LOW HIGH needs LOW < HIGH; got 1 0"),
    (["--mean", "0.5"], "--mean and --std go together; give both (or --preprocessing)"),
])
def test_conflicting_preprocessing_flags_are_refused_in_one_line(tmp_path, capsys, flags, message):
    """Refused before the model file is read (it does not exist), nothing written, no traceback."""
    out = tmp_path / "m.tflite"
    code = main(["export", "--keras-model", str(tmp_path / "missing.keras"), "--out", str(out), *flags])
    err = capsys.readouterr().err
    assert code == 2 and err == f"tflite-train export: error: {message}\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flags,fragment", [
    (["--channel-order", "grb"], "argument --channel-order: invalid choice: 'grb'"),
    (["--preprocessing", "caffee"], "argument --preprocessing: invalid choice: 'caffee'"),
    (["--input-range", "0"], "argument --input-range: expected 2 arguments"),
    (["--input-range", "0", "nan"], "argument --input-range: must be >= -1e+06 and <= 1e+06; got 'nan'"),
])
def test_bad_preprocessing_flag_values_are_refused_while_parsing(tmp_path, capsys, flags, fragment):
    with pytest.raises(SystemExit) as info:
        main(["export", "--out", str(tmp_path / "m.tflite"), *flags])
    err = capsys.readouterr().err
    assert info.value.code == 2 and fragment in err and "Traceback" not in err


# --- the warning ---------------------------------------------------------------------------------------------------


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "preprocessing" in r.getMessage()]


def _prepare_warnings(caplog, model, *field_sets: dict) -> list[str]:
    """The preprocessing warnings of ``prepare_model`` on ``model`` under each of ``field_sets`` (ExportConfig fields)."""
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        for fields in field_sets:
            prepare_model(model, ExportConfig(**FAST, **fields))
    return _warnings(caplog)


def test_warning_for_a_resnet50_named_model_without_flags_and_not_with_them(caplog):
    model = small_cnn("resnet50")
    assert _prepare_warnings(caplog, model, {}) == [
        "keras ResNet50 expects caffe preprocessing (BGR, mean-subtracted 0..255) outside the model; pass "
        "--preprocessing caffe"]
    # any stated preprocessing silences it
    assert _prepare_warnings(caplog, model, preset_fields("caffe"), {"input_range": (0, 255)}) == []


def test_warning_for_keras_mobilenet_v2_without_flags_and_not_with_them(caplog):
    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, weights=None)
    assert _prepare_warnings(caplog, model, {}) == [
        "keras MobileNetV2 expects tf preprocessing (0..255 scaled to [-1, 1]) outside the model; pass "
        "--preprocessing tf"]
    assert _prepare_warnings(caplog, model, preset_fields("tf")) == []


def test_no_warning_when_the_model_contains_its_preprocessing_or_is_not_a_keras_family(caplog):
    config = ExportConfig(**FAST)
    assert missing_preprocessing_warning("resnet50", True, config) is None  # Rescaling/Normalization absorbed
    assert missing_preprocessing_warning("MobileNetV3Small", False, config) is None
    assert missing_preprocessing_warning("resnet50", False, ExportConfig()) is None  # a built-in backbone
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((32, 32, 3))
    x = keras.layers.Rescaling(1 / 127.5, offset=-1, name="rescale")(x)  # MobileNetV3-style, inside the model
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu", name="stem")(x)
    x = keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="top")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    with_layer = keras.Model(inputs, keras.layers.Dense(5, name="cls")(x), name="mobilenetv2_1.00_224")
    with caplog.at_level(logging.WARNING):
        prepared = prepare_model(with_layer, config)
    assert prepared.graph.input_spec.source != "config" and _warnings(caplog) == []


# --- a BGR export on the device --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def caffe_export(tmp_path_factory) -> tuple[keras.Model, pathlib.Path]:
    """A small CNN exported with ``--preprocessing caffe`` through the CLI (one export for the module)."""
    folder = tmp_path_factory.mktemp("caffe")
    model = small_cnn("resnet50")
    model.save(folder / "m.keras")
    out = folder / "m.tflite"
    assert main(["export", "--keras-model", str(folder / "m.keras"), "--out", str(out), "--preprocessing", "caffe",
                 "--candidates", "layers:2", "--capacity", "4"]) == 0
    return model, out


def test_bgr_export_records_range_and_order_and_passes_load_time_validation(caffe_export):
    _, out = caffe_export
    model = TrainableModel(out)
    inp = model.metadata[C.F_INPUT]
    assert inp[C.F_RANGE] == [0.0, 255.0] and inp[C.F_CHANNEL_ORDER] == C.CHANNEL_ORDER_BGR
    assert inp[C.F_MEAN] == list(PRESETS["caffe"].mean) and inp[C.F_STD] == [1.0, 1.0, 1.0]
    assert model.metadata[C.F_CONFIG][C.F_CHANNEL_ORDER] == C.CHANNEL_ORDER_BGR
    assert input_range(model.metadata) == (0.0, 255.0)
    bad = json.loads(json.dumps(model.metadata))
    bad[C.F_INPUT][C.F_CHANNEL_ORDER] = "grb"
    with pytest.raises(C.ContractError, match="metadata field input.channel_order: must be one of rgb, bgr"):
        check_model_metadata(bad)


def test_bgr_export_infer_on_rgb_equals_keras_on_the_flipped_normalised_image(caffe_export):
    """``infer`` fed RGB 0..255 = the Keras model on keras' caffe preprocessing of the same pixels
    (BGR flip, mean subtraction), within TOLERANCE; without the flip it would be far off."""
    model, out = caffe_export
    images = rgb_images()
    got = TrainableModel(out).infer(images)[C.EMBEDDINGS]
    want = keras_embedding(model, keras_preprocess(images, "caffe"))
    scale = float(np.abs(want).max())
    assert np.abs(got - want).max() <= TOLERANCE * scale
    unflipped = keras_embedding(model, images - np.float32(PRESETS["caffe"].mean))
    assert np.abs(unflipped - want).max() > 100 * TOLERANCE * scale  # the flip matters for this model


def test_pi_runtime_feeds_an_image_file_in_the_recorded_range(caffe_export, tmp_path):
    """In the Pi env (tflite-runtime 2.14, no TensorFlow): load_images with the metadata's input range, then
    ``infer``; equal to the Keras model on keras' caffe preprocessing of the decoded pixels."""
    if not PI_PYTHON.exists():
        pytest.skip(f"no Pi env at {PI_PYTHON} (make {REPO / '.venv-pi'}/.installed)")
    model, out = caffe_export
    png = tmp_path / "img.png"
    Image.fromarray(rgb_images(1)[0].round().astype(np.uint8)).save(png)
    result = tmp_path / "emb.npy"
    script = ("import sys, numpy as np\n"
              "from tflite_train.runtime import TrainableModel, input_range\n"
              "from tflite_train.runtime.images.model_input import load_images\n"
              "import tflite_runtime\n"
              "m = TrainableModel(sys.argv[1])\n"
              "x = load_images([sys.argv[2]], m.input_shape, input_range(m.metadata))\n"
              "np.save(sys.argv[3], m.infer(x)['embeddings'])\n")
    proc = subprocess.run([str(PI_PYTHON), "-c", script, str(out), str(png), str(result)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    pixels = load_images([png], (32, 32, 3), (0.0, 255.0))  # the decoded pixels, 0..255 RGB
    want = keras_embedding(model, keras_preprocess(pixels, "caffe"))
    np.testing.assert_allclose(np.load(result), want, atol=TOLERANCE * float(np.abs(want).max()), rtol=0)
