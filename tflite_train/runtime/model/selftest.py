"""Replays the self-test embedded in an exported model on the installed interpreter.

Self-test format (metadata entry ``tflite_train_selftest``): an ``np.savez`` archive.

Format 2 (``format_version`` = 2; written by ``converters.selftest_vectors``) stores what the check
needs and regenerates the rest on the device:

* inputs: ``seed`` (int64), ``image_shape`` i32[4] = (N, H, W, C) and ``image_range`` f32[2] = (lo, hi):
  the images are ``selftest_images(seed, image_shape, image_range)`` (numpy's PCG64 ``default_rng``
  stream, identical under numpy 1.26 and 2.x); ``labels`` i32[N]; ``prototypes`` f32[K, D] (K =
  classes used); ``channel_mask`` u8[S]; ``steps`` (number of train steps);
* goldens that TensorFlow computed from the exported initial state: ``infer/embeddings``,
  ``infer/logits`` (the K used classes), ``fisher/<layer>``, ``train_step/<i>/loss`` and
  ``/accuracy``, ``state/<layer>_bias`` (after the steps) and ``state/<layer>_kernel`` as a
  per-output-channel *sketch* of the kernel after the steps (see ``kernel_sketch``), and
  ``tolerance/<group>``.

Format 1 (older files: ``images`` stored, ``state/<var>`` the whole variables) is replayed too.

The procedure: reset_state, set_head(prototypes), infer, fisher, get_state (initial),
set_selection(mask), train_step x steps, get_state, reset_state.

Optional replays of a file with the episode and accumulation signatures (issue 39), when the self-test's
selection can step from a cached cut (its lowest candidate is a cut) and the interpreter may run the
cache (``TrainableModel.cache_unsafe``):

* ``episode``: reset_state, set_head, set_selection(mask), ``features_<cut>``, ``episode_step_from_<cut>`` x
  steps with ``selftest_support_mask``, get_state; goldens ``episode/<i>/loss``, ``/accuracy`` and
  ``episode/state/<var>`` (summarised as ``state/``), ``tolerance/episode``. Older runtimes ignore the
  ``episode/`` keys (an unknown group).
* ``accumulate``: the same steps as the train steps, each as ``accumulate_from_<cut>`` one row at a time
  then ``apply_accumulated``; compared with the ``train_step`` and ``state`` goldens (gradient
  accumulation must give the batch step), tolerance the larger of theirs. No goldens of its own.

Checks, per group:
* ``infer``, ``fisher``, ``train_step``, ``state``: deviation of a tensor
  max |tflite - golden| / max |golden| (relative to the tensor's scale, see ``deviation``); a group
  passes when its largest deviation is <= its tolerance (``converters.selftest_vectors``: a floor per
  group, raised for a model whose procedure is sensitive to float rounding, measured at export);
* ``frozen``: the channels the mask leaves unselected (kernels and biases of every candidate layer)
  must be bit-identical before and after the steps: deviation max |after - before|, tolerance 0.

Kernel sketch of a kernel W with C output channels (channel axis a = the last axis of size C):
s_o = sum_{i != a} W[..., o, ...] R[..., o, ...], R ~ U(-1, 1) drawn from
``default_rng([seed, *name.encode()])`` with W's shape; computed in float64. A linear map: a change of
any one weight of channel o by d changes s_o by d R (|R| < 1, nonzero almost surely).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.model.cached_cut import CachedCut
from tflite_train.runtime.model.interpreter import TrainableModel
from tflite_train.runtime.model.metadata import SELFTEST_NAME, read_metadata_buffers
from tflite_train.runtime.model.selftest_schema import SelftestError, check_selftest_vectors, load_selftest_archive

SELFTEST_FORMAT_VERSION = 2
EPISODE = "episode"
ACCUMULATE = "accumulate"
GROUPS = (C.INFER, C.FISHER, C.TRAIN_STEP, "state", "frozen", EPISODE, ACCUMULATE)
OPTIONAL_GROUPS = (EPISODE, ACCUMULATE)
"""Groups replayed only on files (and interpreters) that can run them; left out of the result otherwise."""


@dataclasses.dataclass(frozen=True)
class SelftestResult:
    """Largest deviation per group and whether it is within tolerance."""

    runtime: str
    deviation: dict[str, float]
    tolerance: dict[str, float]
    worst: dict[str, str]

    @property
    def passed(self) -> bool:
        return all(self.deviation[g] <= self.tolerance[g] for g in self.deviation)

    def format(self) -> str:
        lines = [f"runtime: {self.runtime}"]
        for g in self.deviation:
            ok = "PASS" if self.deviation[g] <= self.tolerance[g] else "FAIL"
            lines.append(f"{ok} {g:<11} max deviation {self.deviation[g]:.3e} (tolerance {self.tolerance[g]:.1e}, worst {self.worst[g]})")
        lines.append("PASSED" if self.passed else "FAILED")
        return "\n".join(lines)


ZERO_GOLDEN_SCALE = 1e-6
"""The scale of an all-zero golden: its deviation is max |actual| / 1e-6 (an absolute check)."""
TINY_SCALE = 1e-30
"""The smallest scale of a nonzero golden (float32's normal range ends at 1.2e-38)."""


def deviation(actual: np.ndarray, golden: np.ndarray) -> float:
    """max |actual - golden| / scale, scale = max |golden| (at least ``TINY_SCALE``), or
    ``ZERO_GOLDEN_SCALE`` when the golden is all zero.

    Purely relative for a nonzero golden: float32 rounding is relative to the magnitude at every scale
    of its normal range, so an untrained network whose embeddings are 1e-17 and whose Fisher values
    are 1e-23 is checked as strictly as a trained one (an absolute floor of 1e-6, as before, would
    accept any value below it: a corrupted weight there went unnoticed).
    """
    golden = np.asarray(golden, np.float64)
    actual = np.asarray(actual, np.float64)
    if actual.shape != golden.shape:
        return float("inf")
    if golden.size == 0:
        return 0.0
    peak = float(np.max(np.abs(golden)))
    scale = max(peak, TINY_SCALE) if peak > 0 else ZERO_GOLDEN_SCALE
    return float(np.max(np.abs(actual - golden)) / scale)


def selftest_images(seed: int, shape: tuple[int, ...], value_range: tuple[float, float]) -> np.ndarray:
    """The self-test images: ``default_rng(seed).uniform(lo, hi, shape)`` as float32.

    One source of truth for the exporter (``converters.selftest_vectors``) and the device.
    """
    low, high = (float(v) for v in value_range)
    return np.random.default_rng(int(seed)).uniform(low, high, tuple(int(s) for s in shape)).astype(np.float32)


def channel_axis(shape: tuple[int, ...], channels: int) -> int:
    """The output-channel axis of a kernel: the last axis of size ``channels``.

    Raises:
      ValueError: no axis has that size.
    """
    for axis in range(len(shape) - 1, -1, -1):
        if shape[axis] == channels:
            return axis
    raise ValueError(f"kernel of shape {tuple(shape)} has no axis of {channels} channels")


def kernel_sketch(kernel: np.ndarray, channels: int, seed: int, name: str) -> np.ndarray:
    """s_o = sum over every axis but the channel axis of W * R (R ~ U(-1, 1) seeded by ``seed``, ``name``).

    Returns:
      float64[channels].
    """
    kernel = np.asarray(kernel, np.float64)
    axis = channel_axis(kernel.shape, channels)
    r = np.random.default_rng([int(seed), *name.encode()]).uniform(-1.0, 1.0, kernel.shape)
    return np.moveaxis(kernel * r, axis, -1).reshape(-1, channels).sum(axis=0)


def load_selftest(model: str | os.PathLike | bytes) -> dict[str, np.ndarray]:
    """The embedded self-test arrays (opened without pickle, members checked: ``selftest_schema``).

    Raises:
      SelftestError: the model has no self-test entry, or it is damaged.
      ValueError: the file is not a readable ``.tflite``.
    """
    source = "model bytes" if isinstance(model, (bytes, bytearray, memoryview)) else str(model)
    entries = read_metadata_buffers(model)
    if SELFTEST_NAME not in entries:
        raise SelftestError(f"{source}: model has no {SELFTEST_NAME!r} metadata entry")
    return load_selftest_archive(entries[SELFTEST_NAME], source)


def selftest_support_mask(batch: int) -> np.ndarray:
    """``support_mask`` of the self-test's episode steps: 1, 0, 1, 0, ... (every other row a support row).

    With the self-test's labels 0, 0, 1, 1, 2, ... (``converters.selftest_vectors.selftest_labels``) every
    class's first row is a support row and its second a query row, so the query rows' loss reaches the
    weights through their own embeddings and through the prototypes.
    """
    return (np.arange(int(batch)) % 2 == 0).astype(np.float32)


def replay_images(vectors: Mapping[str, np.ndarray]) -> np.ndarray:
    """The self-test images: stored (format 1) or regenerated from the seed (format 2)."""
    if C.IMAGES in vectors:
        return np.asarray(vectors[C.IMAGES], np.float32)
    return selftest_images(int(vectors["seed"]), tuple(vectors["image_shape"]), tuple(vectors["image_range"]))


def _layer_masks(model: TrainableModel, channel_mask: np.ndarray) -> dict[str, np.ndarray]:
    sizes = [model.candidate_channels[n] for n in model.candidates]
    parts = np.split(np.asarray(channel_mask, np.float32), np.cumsum(sizes)[:-1])
    return dict(zip(model.candidates, (p > 0.5 for p in parts)))


def _frozen_change(model: TrainableModel, masks: Mapping[str, np.ndarray], before: Mapping[str, np.ndarray],
                   after: Mapping[str, np.ndarray]) -> dict[str, float]:
    """max |after - before| over the unselected channels of each candidate kernel and bias."""
    out = {}
    for name, selected in masks.items():
        channels = model.candidate_channels[name]
        for var in (name + C.KERNEL_SUFFIX, name + C.BIAS_SUFFIX):
            b, a = np.asarray(before[var]), np.asarray(after[var])
            axis = channel_axis(b.shape, channels)
            keep = ~selected
            diff = np.abs(np.compress(keep, a, axis=axis).astype(np.float64) - np.compress(keep, b, axis=axis))
            out[f"frozen/{var}"] = float(diff.max()) if diff.size else 0.0
    return out


def run_procedure(model: TrainableModel, vectors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Runs the self-test procedure on ``model`` and returns outputs keyed like the goldens
    (``state/<var>`` summarised as its golden is: whole, or the kernel sketch) plus ``frozen/<var>``."""
    out: dict[str, np.ndarray] = {}
    model.reset_state()
    model.set_head(vectors[C.PROTOTYPES])
    images, labels = replay_images(vectors), vectors[C.LABELS]
    k_used = len(vectors[C.PROTOTYPES])
    for k, v in model.infer(images).items():
        out[f"{C.INFER}/{k}"] = v[:, :k_used] if k == C.LOGITS else v
    for k, v in model.fisher(images, labels).items():
        out[f"{C.FISHER}/{k}"] = v
    before = model.get_state()
    mask = np.asarray(vectors[C.CHANNEL_MASK], np.float32)
    model.set_selection(mask)
    for i in range(int(vectors["steps"])):
        for k, v in model.train_step(images, labels).items():
            out[f"{C.TRAIN_STEP}/{i}/{k}"] = np.asarray(v, np.float32)
    state = model.get_state()
    seed = int(vectors["seed"]) if "seed" in vectors else 0
    out.update(summarised_state(state, vectors, seed))
    out.update(_frozen_change(model, _layer_masks(model, mask), before, state))
    if any(key.startswith(EPISODE + "/") for key in vectors):
        out.update(_episode_replay(model, vectors, images, mask, seed))
    model.reset_state()
    return out


def summarised_state(state: Mapping[str, np.ndarray], vectors: Mapping[str, np.ndarray], seed: int,
                     prefix: str = "state/") -> dict[str, np.ndarray]:
    """``<prefix><var>`` of every golden so keyed, summarised as the golden is: whole, or the kernel sketch."""
    out = {}
    for key, golden in vectors.items():
        if not key.startswith(prefix):
            continue
        var = key[len(prefix):]
        value = state[var]
        if value.shape == golden.shape:
            out[key] = value
        else:
            out[key] = kernel_sketch(value, golden.shape[0], seed, var) if golden.ndim == 1 else value
    return out


def _replay_cut(model: TrainableModel, vectors: Mapping[str, np.ndarray], mask: np.ndarray,
                signature: Callable[[CachedCut], str | None]) -> CachedCut | None:
    """Resets the model, sets the self-test's head and selection and returns the cut the selection steps
    from, when ``signature(cut)`` names the signature a replay needs and the interpreter may run the cache;
    else None."""
    model.reset_state()
    model.set_head(vectors[C.PROTOTYPES])
    model.set_selection(mask)
    cut = model.cache_cut()
    if cut is None or signature(cut) is None or model.cache_unsafe:
        return None
    return cut


def _episode_replay(model: TrainableModel, vectors: Mapping[str, np.ndarray], images: np.ndarray, mask: np.ndarray,
                    seed: int) -> dict[str, np.ndarray]:
    """The ``episode`` replay (module docstring): outputs keyed like its goldens, {} when it cannot run."""
    cut = _replay_cut(model, vectors, mask, lambda c: c.episode_signature)
    if cut is None:
        return {}
    labels = vectors[C.LABELS]
    activations = model.features(cut, images)
    out = {}
    for i in range(int(vectors["steps"])):
        for k, v in model.episode_step_from(cut, activations, labels, selftest_support_mask(len(labels))).items():
            out[f"{EPISODE}/{i}/{k}"] = np.asarray(v, np.float32)
    out.update(summarised_state(model.get_state(), vectors, seed, f"{EPISODE}/state/"))
    return out


def _accumulation_replay(model: TrainableModel, vectors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The ``accumulate`` replay (module docstring): the train steps as one-row accumulations and
    ``apply_accumulated``, keyed like the ``train_step`` and ``state`` goldens; {} when it cannot run."""
    mask = np.asarray(vectors[C.CHANNEL_MASK], np.float32)
    cut = _replay_cut(model, vectors, mask, lambda c: c.accumulate_signature) if model.can_accumulate else None
    if cut is None:
        return {}
    images, labels = replay_images(vectors), vectors[C.LABELS]
    activations = model.features(cut, images)
    out = {}
    for i in range(int(vectors["steps"])):
        rows = [model.accumulate_from(cut, activations[n:n + 1], labels[n:n + 1]) for n in range(len(labels))]
        model.apply_accumulated()
        for k in rows[0]:
            out[f"{C.TRAIN_STEP}/{i}/{k}"] = np.float32(np.mean([row[k] for row in rows]))
    out.update(summarised_state(model.get_state(), vectors, int(vectors["seed"]) if "seed" in vectors else 0))
    model.reset_state()
    return out


def group_deviations(actual: Mapping[str, np.ndarray],
                     goldens: Mapping[str, np.ndarray]) -> tuple[dict[str, float], dict[str, str]]:
    """Largest ``deviation`` per compared group (``GROUPS`` but ``frozen``) over the golden keys
    ``<group>/...``, and the key where it occurs ("-" for a group without keys); a golden missing from
    ``actual`` deviates infinitely. Other keys of ``goldens`` (inputs, tolerances) are ignored."""
    dev = {g: 0.0 for g in GROUPS if g != "frozen"}
    worst = {g: "-" for g in dev}
    for key, golden in goldens.items():
        group = key.split("/", 1)[0]
        if group not in dev:
            continue
        d = deviation(actual[key], golden) if key in actual else float("inf")
        if d > dev[group] or worst[group] == "-":
            dev[group], worst[group] = max(d, dev[group]), key
    return dev, worst


def verify(model_path: str | os.PathLike | bytes, runtime: str | None = None,
           vectors: dict[str, np.ndarray] | None = None, xnnpack: bool = False) -> SelftestResult:
    """Replays the embedded self-test (or ``vectors``) and compares with the goldens
    (``xnnpack``: with the explicitly created delegate, ``TrainableModel``)."""
    model = TrainableModel(model_path, runtime=runtime, xnnpack=xnnpack)  # the seal and metadata first
    source = "model bytes" if isinstance(model_path, (bytes, bytearray, memoryview)) else str(model_path)
    vectors = load_selftest(model_path) if vectors is None else vectors
    check_selftest_vectors(vectors, input_shape=model.input_shape, feature_dim=model.feature_dim,
                           capacity=model.capacity, mask_length=sum(model.candidate_channels.values()),
                           state_names=tuple(model.metadata[C.F_STATE]), source=source)
    actual = run_procedure(model, vectors)
    dev, worst = group_deviations(actual, vectors)
    dev["frozen"], worst["frozen"] = 0.0, "-"
    for key, change in actual.items():
        if key.startswith("frozen/") and (change > dev["frozen"] or worst["frozen"] == "-"):
            dev["frozen"], worst["frozen"] = max(change, dev["frozen"]), key
    tol = {g: float(vectors[f"tolerance/{g}"]) if f"tolerance/{g}" in vectors else 0.0 for g in GROUPS}
    accumulated = _accumulation_replay(model, vectors)
    if accumulated:
        steps = {k: v for k, v in vectors.items() if k.startswith((f"{C.TRAIN_STEP}/", "state/"))}
        acc_dev, acc_worst = group_deviations(accumulated, steps)
        group = max((C.TRAIN_STEP, "state"), key=acc_dev.__getitem__)
        dev[ACCUMULATE], worst[ACCUMULATE] = acc_dev[group], acc_worst[group]
        tol[ACCUMULATE] = max(tol[C.TRAIN_STEP], tol["state"])
    for group in OPTIONAL_GROUPS:  # not replayed: no goldens, or a file or interpreter without the signatures
        if worst.get(group, "-") == "-" or (group == EPISODE and not any(k.startswith(f"{EPISODE}/") for k in actual)):
            dev.pop(group, None)
            worst.pop(group, None)
    return SelftestResult(model.runtime, dev, {g: tol[g] for g in dev}, worst)
