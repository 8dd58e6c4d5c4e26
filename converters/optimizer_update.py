"""The channel-masked optimizer step of one candidate layer, in elementwise builtin ops.

TinyTrain (Sec. 3.3) updates the selected output channels of a selected layer only. With s_o in
{0, 1} the selection mask of output channel o (broadcast over the parameter's other axes), g the
gradient and t the step count, the step is written so that the mask scales the coefficients of
every increment:

* Adam (Kingma & Ba 2015, Alg. 1; m_hat = m'/(1 - b1^t), v_hat = v'/(1 - b2^t),
  w' = w - lr m_hat / (sqrt(v_hat) + eps), rearranged with scalar bias corrections):
      m' = m + ((1 - b1) s) (g - m)
      v' = v + ((1 - b2) s) (g^2 - v)
      w' = w - (lr_t s) m' / (sqrt(v') + eps_t),  lr_t = lr sqrt(1 - b2^t) / (1 - b1^t),
                                                   eps_t = eps sqrt(1 - b2^t)
* SGD with momentum mu: u' = u + s (g - (1 - mu) u), w' = w - (lr s) u'.

Where s = 1 these are the usual updates (up to rounding); where s = 0 every increment is an
exact zero, so an unselected channel of the parameter and of its slots keeps its value (x + 0 = x;
only a -0.0 may come back as +0.0), as the contract requires, without a SELECT. Measured
(``bench/results/TRAIN_STEP_PROFILE.md``, single-op models at EfficientNet-Lite0@128's shapes,
ai-edge-litert, 1 thread): the Adam step of a 192x1152 1x1 kernel with its slots takes half the
time of the same step computed on whole tensors and merged by SELECT_V2 with the broadcast mask
(SELECT_V2 with a broadcast condition is TFLite's slow path; a scalar-by-vector MUL is not), and
the bias corrections are scalars instead of two whole-tensor divisions.
"""

from __future__ import annotations

import tensorflow as tf

from tflite_train.converters.export_config import ExportConfig

__all__ = ["masked_optimizer_step"]


def masked_optimizer_step(config: ExportConfig, cur: list, grad, mask, learning_rate, step) -> list:
    """New values of [param, *slots] (module docstring).

    Args:
      config: The export configuration (optimizer kind and constants).
      cur: Current [param, *slots] values ([param, m, v] for Adam, [param, u] for SGD).
      grad: The gradient of every channel, in the parameter's shape.
      mask: 1.0 / 0.0 per output channel, shaped to broadcast against the parameter.
      learning_rate: The learning rate, shape [1].
      step: The step count t (already incremented for this step), shape [1].
    """
    if config.optimizer == "adam":
        b1, b2 = config.beta1, config.beta2
        root = tf.sqrt(1.0 - tf.pow(b2, step))
        lr_t = learning_rate * root / (1.0 - tf.pow(b1, step))
        eps_t = config.epsilon * root
        m = cur[1] + ((1.0 - b1) * mask) * (grad - cur[1])
        v = cur[2] + ((1.0 - b2) * mask) * (grad * grad - cur[2])
        return [cur[0] - (lr_t * mask) * (m / (tf.sqrt(v) + eps_t)), m, v]
    mom = cur[1] + mask * (grad - (1.0 - config.momentum) * cur[1])
    return [cur[0] - (learning_rate * mask) * mom, mom]
