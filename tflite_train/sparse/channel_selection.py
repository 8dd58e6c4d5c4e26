"""Output-channel selection inside a selected layer (paper §4, "Dynamic channel selection").

TinyTrain keeps the K channels with the largest Fisher information (the objective after Eq. 3):

    C_sel = argmax_{C' subset of C, |C'| = K} sum_{c in C'} Delta_c        (top-K by Delta)

The ablations of Fig. 4 / Table 3 replace Delta by the L2 norm of each output channel's weights
(``"l2"``), or draw K channels uniformly at random without replacement (``"random"``, seeded).

Conventions: every function returns the chosen channel indices **sorted ascending** as a tuple of
Python ints. For top-K, equal values are broken by the **lower channel index first**. K comes from
a channel ratio via ``cost_model.channel_count`` (K = max(1, ceil(ratio * C_out))).

Weight layout for ``"l2"``: output channel on the *last* axis, i.e. shape (..., C_out) with
fan_in * C_out values (Keras Conv2D (kh, kw, C_in, C_out); TFLite DepthwiseConv2D (1, kh, kw, C));
for a TFLite Conv2D kernel (C_out, kh, kw, C_in) pass ``np.moveaxis(kernel, 0, -1)``.

Weight magnitude and dead channels (``l2_channels(..., live=...)``): an exported kernel has its
BatchNorm folded in, W'_o = W_o gamma_o / sqrt(var_o + eps), so a channel whose BN variance was
tiny gets a large norm. Such a channel is typically one whose input is dead (a depthwise channel
behind an expand channel that ReLU6 always zeroes: constant output, var ~ 0), and a dead channel
gets no gradient: updating it changes nothing. On the meta-trained EfficientNet-Lite0@128 the
larger-norm half of b14_depthwise has a median fold factor of 9.6 against 3.0 for the other half, and
59 % of it is dead on every meta-training (source) task against 19 % (issue 28). ``live`` (a channel
had a non-zero Fisher information on some source task, a static, offline signal) ranks the channels
that can train first; the magnitude order applies within each group.
"""

from __future__ import annotations

import numpy as np

from tflite_train.sparse.fisher import check_fisher_vector

CHANNEL_METHODS = ("fisher", "l2", "random")
"""Channel-selection methods: TinyTrain's top-K Fisher, and the two static ablations."""


def _check_k(k: int, num_channels: int) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= num_channels:
        raise ValueError(f"k must be an int in 1..{num_channels}; got {k!r}")


def top_k_channels(values: np.ndarray, k: int) -> tuple[int, ...]:
    """Indices of the ``k`` largest entries of ``values``; ties -> lower index first; sorted ascending.

    Args:
      values: Per-channel importance, 1-D, finite, >= 0 (Fisher Delta or an L2 norm).
      k: Number of channels, 1..len(values).
    """
    vector = check_fisher_vector(values, "values")
    _check_k(k, vector.size)
    order = np.lexsort((np.arange(vector.size), -vector))  # primary: -value; secondary: index
    return tuple(sorted(int(i) for i in order[:k]))


def fisher_channels(delta: np.ndarray, k: int) -> tuple[int, ...]:
    """TinyTrain's dynamic channel selection: top-K output channels by Fisher information Delta_o."""
    return top_k_channels(delta, k)


def channel_l2_norms(weights: np.ndarray) -> np.ndarray:
    """L2 norm of each output channel's weights: n_o = sqrt(sum_{...} W[..., o]^2); channel axis last."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim < 1 or w.size == 0:
        raise ValueError(f"weights must be a non-empty array with output channels last; got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite; got NaN or inf")
    flat = w.reshape(-1, w.shape[-1])
    return np.sqrt(np.sum(flat * flat, axis=0))


def l2_channels(weights: np.ndarray, k: int, live: np.ndarray | None = None) -> tuple[int, ...]:
    """Static ablation / SparseUpdate: top-K output channels by weight L2 norm (channel axis last).

    Args:
      weights: The layer's weights, output channel last.
      k: Number of channels, 1..C_out.
      live: Optional bool[C_out], True where the channel can receive a gradient (see the module
        docstring and ``live_channels``). Live channels come first, each group by decreasing norm
        (ties -> lower index first); dead channels are chosen only when fewer than ``k`` are live.
        None: the plain magnitude order.
    """
    norms = channel_l2_norms(weights)
    if live is None:
        return top_k_channels(norms, k)
    live = np.asarray(live)
    if live.dtype != np.bool_ or live.shape != norms.shape:
        raise ValueError(f"live must be a bool array of shape {norms.shape}; got {live.dtype} {live.shape}")
    _check_k(k, norms.size)
    order = np.lexsort((np.arange(norms.size), -norms, ~live))  # primary: live first; then -norm; then index
    return tuple(sorted(int(i) for i in order[:k]))


def live_channels(fisher_tasks, name: str) -> np.ndarray:
    """bool[C_out]: True where layer ``name`` has a non-zero Fisher information Delta_o on at least one
    of ``fisher_tasks`` (per-task dicts layer -> Delta vector, e.g. meta-training tasks).

    Delta_o = 1/(2N) sum_n (sum_d a g)^2 is exactly 0 when the channel's activation a or its gradient g
    is 0 on every sample (a ReLU/ReLU6 channel that is always off, or always saturated): such a channel's
    weights get no gradient from those samples.

    Raises:
      ValueError: no tasks, a task without ``name``, vectors of different lengths or invalid values.
    """
    tasks = list(fisher_tasks)
    if not tasks:
        raise ValueError("fisher_tasks must not be empty")
    vectors = []
    for t, task in enumerate(tasks):
        if name not in task:
            raise ValueError(f"fisher_tasks[{t}] has no Fisher vector for layer {name!r}")
        vectors.append(check_fisher_vector(task[name], f"fisher_tasks[{t}][{name!r}]"))
    if len({v.shape for v in vectors}) != 1:
        raise ValueError(f"fisher_tasks have Fisher vectors of different lengths for layer {name!r}")
    return np.any(np.stack(vectors) > 0.0, axis=0)


def random_channels(num_channels: int, k: int, rng: np.random.Generator | int) -> tuple[int, ...]:
    """``k`` distinct channels drawn uniformly from 0..num_channels-1 (sorted ascending).

    Args:
      num_channels: C_out.
      k: Number of channels, 1..C_out.
      rng: A ``numpy.random.Generator`` (advanced by the draw) or an int seed for
        ``numpy.random.default_rng``. The same seed gives the same channels (numpy's PCG64;
        another runtime's port draws its own, equally uniform, channels).
    """
    if isinstance(num_channels, bool) or not isinstance(num_channels, (int, np.integer)) or num_channels < 1:
        raise ValueError(f"num_channels must be an int >= 1; got {num_channels!r}")
    _check_k(k, num_channels)
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        rng = np.random.default_rng(int(rng))
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator or an int seed; got {rng!r}")
    return tuple(sorted(int(i) for i in rng.choice(int(num_channels), size=int(k), replace=False)))
