"""The peer of the timing section: TensorFlow's standard on-device-training recipe.

A ``tf.Module`` holds the BN-folded backbone's conv kernels and biases as ``tf.Variable``s plus
frozen cosine-head prototypes; its ``train`` signature computes the mean cross-entropy of
logits = s * cos(f(x), c_k), takes the full gradient of every conv weight with
``tf.GradientTape`` and applies one Adam step

  m <- b1 m + (1 - b1) g,  v <- b2 v + (1 - b2) g^2,
  w <- w - lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)   (Kingma & Ba 2015, Alg. 1).

It is converted with ``SELECT_TF_OPS`` (Flex) + builtins and resource variables, as in TensorFlow's
"On-device training in TensorFlow Lite" guide, and run by ``tf.lite.Interpreter``. The TensorFlow
2.21 pip wheel no longer links the Flex delegate into ``tf.lite.Interpreter`` (it has only the weak
``tflite::AcquireFlexDelegate`` stub; invoking a Flex op fails with "Select TensorFlow op(s) ... not
supported"); then the same ``train`` graph is timed as a ``tf.function`` in TensorFlow, which runs
the very TF kernels Flex would dispatch to, without the delegate's tensor copies. Needs TensorFlow.
"""

from __future__ import annotations

import tempfile
import time

import numpy as np

from tflite_train import contract as C


def build_recipe_model(backbone: str, input_size: int, weights: str | None, num_classes: int,
                       batch_size: int, cosine_scale: float = 10.0, learning_rate: float = 1e-3,
                       seed: int = 0) -> tuple[object, bytes]:
    """(the ``tf.Module``, its ``train`` signature converted to a Flex ``.tflite``)."""
    import tensorflow as tf

    from tflite_train.models import build_backbone, fold_batchnorm

    keras_backbone = build_backbone(backbone, input_size, seed=seed)
    if weights:
        keras_backbone.model.load_weights(weights)
    folded = fold_batchnorm(keras_backbone)
    table, config = folded.table, folded.config
    by_block: dict[int, list] = {}
    for spec in table:
        by_block.setdefault(spec.block, []).append(spec)
    residual = {b for b, block in enumerate(config.blocks) if block.residual}
    rng = np.random.default_rng(seed)
    prototypes = rng.normal(size=(num_classes, config.feature_dim)).astype(np.float32)

    class Recipe(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kernels, self.biases = [], []
            for spec in table:
                kernel, bias = folded.model.get_layer(spec.name).get_weights()
                self.kernels.append(tf.Variable(kernel, name=spec.name + C.KERNEL_SUFFIX))
                self.biases.append(tf.Variable(bias, name=spec.name + C.BIAS_SUFFIX))
            self.params = self.kernels + self.biases
            self.m = [tf.Variable(tf.zeros_like(p)) for p in self.params]
            self.v = [tf.Variable(tf.zeros_like(p)) for p in self.params]
            self.step = tf.Variable(0.0)
            self.prototypes = tf.Variable(prototypes)

        def _conv(self, x, i):
            spec = table.layers[i]
            strides = [1, spec.stride, spec.stride, 1]
            if spec.is_depthwise:
                x = tf.nn.depthwise_conv2d(x, self.kernels[i], strides, "SAME")
            else:
                x = tf.nn.conv2d(x, self.kernels[i], strides, "SAME")
            x = x + self.biases[i]
            return tf.clip_by_value(x, 0.0, 6.0) if spec.activation == "relu6" else x

        def embed(self, images):
            x = (images - 0.5) / 0.5
            x = self._conv(x, 0)
            for b in range(len(config.blocks)):
                block_input = x
                for spec in by_block[b]:
                    x = self._conv(x, spec.index)
                if b in residual:
                    x = x + block_input
            for spec in by_block.get(len(config.blocks), []):
                x = self._conv(x, spec.index)
            return tf.reduce_mean(x, axis=[1, 2])

        @tf.function(input_signature=[tf.TensorSpec([batch_size, input_size, input_size, 3], tf.float32),
                                      tf.TensorSpec([batch_size], tf.int32)])
        def train(self, images, labels):
            with tf.GradientTape() as tape:
                emb = tf.math.l2_normalize(self.embed(images), axis=1)
                protos = tf.math.l2_normalize(self.prototypes, axis=1)
                logits = cosine_scale * tf.matmul(emb, protos, transpose_b=True)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
            grads = tape.gradient(loss, self.params)
            self.step.assign_add(1.0)
            b1, b2, eps = 0.9, 0.999, 1e-7
            rate = learning_rate * tf.sqrt(1.0 - b2 ** self.step) / (1.0 - b1 ** self.step)
            for p, g, m, v in zip(self.params, grads, self.m, self.v):
                m.assign(b1 * m + (1.0 - b1) * g)
                v.assign(b2 * v + (1.0 - b2) * tf.square(g))
                p.assign_sub(rate * m / (tf.sqrt(v) + eps))
            return {"loss": loss}

    module = Recipe()
    with tempfile.TemporaryDirectory() as tmp:
        tf.saved_model.save(module, tmp, signatures={"train": module.train.get_concrete_function()})
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
        converter.experimental_enable_resource_variables = True
        return module, converter.convert()


def time_recipe_steps(module: object, model: bytes, batch_size: int, input_size: int, num_classes: int, steps: int,
                      threads: int = 1, seed: int = 0) -> dict[str, float]:
    """Load time and per-step times (seconds) of the recipe's ``train`` on ``tf.lite.Interpreter``.

    Falls back to the module's ``tf.function`` when the interpreter cannot run Flex ops (see the
    module docstring); ``"runner"`` says which ran and ``"interpreter_error"`` why.

    Returns:
      {"runner", "load", "first_step", "step_median", "step_mean", "loss_first", "loss_last", "steps",
       "interpreter_error" (or None)}.
    """
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    images = rng.uniform(size=(batch_size, input_size, input_size, 3)).astype(np.float32)
    labels = (np.arange(batch_size) % num_classes).astype(np.int32)
    error = None
    t0 = time.perf_counter()
    interpreter = tf.lite.Interpreter(model_content=model, num_threads=threads)
    runner = interpreter.get_signature_runner("train")
    load = time.perf_counter() - t0
    try:
        runner(images=images, labels=labels)
        name = "tf.lite.Interpreter (Flex)"

        def train():
            return runner(images=images, labels=labels)["loss"]
    except RuntimeError as err:
        error = " ".join(str(err).split())[:300]
        name = "tf.function in TensorFlow (Flex delegate unavailable)"
        tf_images, tf_labels = tf.constant(images), tf.constant(labels)
        t0 = time.perf_counter()
        module.train(tf_images, tf_labels)
        load = time.perf_counter() - t0

        def train():
            return module.train(tf_images, tf_labels)["loss"].numpy()
    times, losses = [], []
    for _ in range(steps + 1):
        t = time.perf_counter()
        losses.append(float(train()))
        times.append(time.perf_counter() - t)
    return {"runner": name, "load": load, "first_step": times[0], "step_median": float(np.median(times[1:])),
            "step_mean": float(np.mean(times[1:])), "loss_first": losses[0], "loss_last": losses[-1],
            "steps": steps, "interpreter_error": error}
