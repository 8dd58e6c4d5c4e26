"""Replays the self-test vectors embedded in an exported model on the installed interpreter.

Self-test format (metadata entry ``tflite_train_selftest``): an ``np.savez`` archive with
``images`` f32[N,H,W,C], ``labels`` i32[N], ``prototypes`` f32[K,D] (K = classes used),
``channel_mask`` f32[S], (``infer/logits`` holds the K used classes only), ``steps`` (number of train steps), and the golden outputs that TensorFlow
computed from the exported initial state: ``infer/embeddings``, ``infer/logits``,
``fisher/<layer>``, ``train_step/<i>/loss``, ``train_step/<i>/accuracy`` and
``state/<variable>`` (candidate kernels and biases after the steps), and ``tolerance/<group>``.
The procedure: reset_state, set_head(prototypes), infer, fisher, set_selection(mask), train_step
x steps, get_state, reset_state.

Deviation of a tensor: max |tflite - golden| / max(max |golden|, 1e-6) (relative to the tensor's
scale); a group passes when its largest deviation is <= its tolerance.
"""

from __future__ import annotations

import dataclasses
import io
import os

import numpy as np

from tflite_train.runtime.interpreter import TrainableModel
from tflite_train.runtime.metadata import SELFTEST_NAME, read_metadata_buffers

GROUPS = ("infer", "fisher", "train_step", "state")


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


def deviation(actual: np.ndarray, golden: np.ndarray) -> float:
    """max |actual - golden| / max(max |golden|, 1e-6)."""
    golden = np.asarray(golden, np.float64)
    actual = np.asarray(actual, np.float64)
    if actual.shape != golden.shape:
        return float("inf")
    if golden.size == 0:
        return 0.0
    return float(np.max(np.abs(actual - golden)) / max(float(np.max(np.abs(golden))), 1e-6))


def load_selftest(model: str | os.PathLike | bytes) -> dict[str, np.ndarray]:
    """The embedded self-test arrays.

    Raises:
      ValueError: when the model has no self-test entry.
    """
    entries = read_metadata_buffers(model)
    if SELFTEST_NAME not in entries:
        raise ValueError(f"model has no {SELFTEST_NAME!r} metadata entry")
    with np.load(io.BytesIO(entries[SELFTEST_NAME]), allow_pickle=False) as archive:
        return {k: archive[k] for k in archive.files}


def run_procedure(model: TrainableModel, vectors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Runs the self-test procedure on ``model`` and returns outputs keyed like the goldens."""
    out: dict[str, np.ndarray] = {}
    model.reset_state()
    model.set_head(vectors["prototypes"])
    images, labels = vectors["images"], vectors["labels"]
    k_used = len(vectors["prototypes"])
    for k, v in model.infer(images).items():
        out[f"infer/{k}"] = v[:, :k_used] if k == "logits" else v
    for k, v in model.fisher(images, labels).items():
        out[f"fisher/{k}"] = v
    model.set_selection(vectors["channel_mask"])
    for i in range(int(vectors["steps"])):
        for k, v in model.train_step(images, labels).items():
            out[f"train_step/{i}/{k}"] = np.asarray(v, np.float32)
    state = model.get_state()
    for key in vectors:
        if key.startswith("state/"):
            out[key] = state[key.split("/", 1)[1]]
    model.reset_state()
    return out


def verify(model_path: str | os.PathLike | bytes, runtime: str | None = None,
           vectors: dict[str, np.ndarray] | None = None) -> SelftestResult:
    """Replays the embedded self-test (or ``vectors``) and compares with the goldens."""
    vectors = load_selftest(model_path) if vectors is None else vectors
    model = TrainableModel(model_path, runtime=runtime)
    actual = run_procedure(model, vectors)
    dev = {g: 0.0 for g in GROUPS}
    worst = {g: "-" for g in GROUPS}
    for key, golden in vectors.items():
        group = key.split("/", 1)[0]
        if group not in GROUPS:
            continue
        d = deviation(actual.get(key, np.array(np.nan)), golden) if key in actual else float("inf")
        if d > dev[group] or worst[group] == "-":
            dev[group], worst[group] = max(d, dev[group]), key
    tol = {g: float(vectors[f"tolerance/{g}"]) for g in GROUPS}
    return SelftestResult(model.runtime, dev, tol, worst)
