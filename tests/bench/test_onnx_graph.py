"""The ONNX twin of the peer bench (bench.onnx_graph): TF "same" pads, forward parity with Keras, and
ORT training artifacts that train only the chosen layers. Runs only where onnx and onnxruntime are
importable (the bench venv, ``make bench-peer``).

Tolerance: max |ort - keras| / max |keras| <= 1e-5 on embeddings and logits (float32, same weights;
measured ~3e-7 on MCUNet@128)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.onnx_graph import keras_to_onnx, parameter_names, same_pads

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def test_same_pads_match_tf_by_hand():
    assert same_pads(32, 3, 2) == (0, 1)  # even input, stride 2: the extra row after
    assert same_pads(33, 3, 2) == (1, 1)
    assert same_pads(16, 5, 1) == (2, 2)
    assert same_pads(8, 1, 1) == (0, 0)
    assert same_pads(7, 7, 2) == (3, 3)


def _folded(size: int):
    from tflite_train.converters.build_module import folded_backbone
    from tflite_train.converters.export_config import ExportConfig

    return folded_backbone(ExportConfig(backbone="tiny", input_size=(size, size), candidate_blocks=2))


@pytest.mark.parametrize("size", [32, 33])
def test_forward_parity_with_keras(size):
    folded = _folded(size)
    rng = np.random.default_rng(size)
    images = rng.uniform(size=(3, size, size, 3)).astype(np.float32)
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    x = (images - np.array(mean, np.float32)) / np.array(std, np.float32)
    emb = np.asarray(folded.model(x, training=False), np.float64)
    protos = rng.normal(size=(4, emb.shape[1])).astype(np.float32)
    model = keras_to_onnx(folded.model, mean, std, protos, 7.5)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got_emb, got_logits = session.run(["embeddings", "logits"], {"images": images})
    e_hat = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    p_hat = protos / np.linalg.norm(protos, axis=1, keepdims=True)
    logits = 7.5 * e_hat @ p_hat.T
    assert np.max(np.abs(got_emb - emb)) / np.max(np.abs(emb)) <= 1e-5
    assert np.max(np.abs(got_logits - logits)) / np.max(np.abs(logits)) <= 1e-5
    # a perturbed weight is visible: the check can fail
    init = next(i for i in model.graph.initializer if i.name == parameter_names(folded.table.layers[0].name)[0])
    w = onnx.numpy_helper.to_array(init).copy()
    w.flat[0] += 1.0
    init.CopyFrom(onnx.numpy_helper.from_array(w, init.name))
    bad = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(["embeddings"], {"images": images})[0]
    assert np.max(np.abs(bad - emb)) / np.max(np.abs(emb)) > 1e-5


def test_untranslated_layer_is_named():
    import keras

    inp = keras.Input((8, 8, 3), name="image")
    x = keras.layers.Conv2D(4, 3, padding="same", name="conv")(inp)
    x = keras.layers.MaxPooling2D(name="pool")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    with pytest.raises(ValueError, match=r"'pool' \(MaxPooling2D\)"):
        keras_to_onnx(keras.Model(inp, x), (0, 0, 0), (1, 1, 1), np.ones((2, 4), np.float32), 10.0)


def test_artifacts_train_only_the_chosen_layers(tmp_path):
    from bench.peer_ort import generate, import_ort_training

    folded = _folded(17)
    rng = np.random.default_rng(0)
    images = rng.uniform(size=(2, 17, 17, 3)).astype(np.float32)
    emb = np.asarray(folded.model(images, training=False))
    model = keras_to_onnx(folded.model, (0, 0, 0), (1, 1, 1), emb, 10.0, with_embeddings=False)
    top = folded.table.layers[-1].name
    generate(model, tmp_path, [top])
    api, _ = import_ort_training()
    state = api.CheckpointState.load_checkpoint(str(tmp_path / "checkpoint"))
    module = api.Module(str(tmp_path / "training_model.onnx"), state, str(tmp_path / "eval_model.onnx"))
    optimizer = api.Optimizer(str(tmp_path / "optimizer_model.onnx"), module)
    module.train()
    labels = np.array([1, 0], np.int64)  # wrong on purpose: the loss must fall as the top layer learns
    losses = []
    for _ in range(5):
        losses.append(float(module(images, labels)))
        optimizer.step()
        module.lazy_reset_grad()
    assert losses[-1] < losses[0]
    trainable = module.get_contiguous_parameters(trainable_only=True).numpy().size
    kernel, bias = folded.model.get_layer(top).get_weights()
    assert trainable == kernel.size + bias.size
