"""Executes the Java tests' signature calls on a real ``.tflite`` file through the Python interpreter.

Run by the JVM tests (``BridgeRunner``) as ``python signature_bridge.py MODEL``. Protocol on
stdin/stdout: each message is a u32 big-endian length then that many bytes of UTF-8 JSON. A tensor is
``{"dtype": "float32" | "int32" | "int64", "shape": [...], "data": base64 of the little-endian
C-order bytes}``. Requests:

* ``{"op": "run", "signature": s, "inputs": {name: tensor}}`` -> ``{"outputs": {name: tensor}}``: the
  raw signature runner (no checks: the Java ``ContractRunner`` enforces the API's preconditions).
* ``{"op": "episode", "ways", "shots", "queries", "seed"}`` -> support/query images (real
  Fashion-MNIST at the model's input size, ``tests.runtime.runtime_fixtures.episode_arrays``) and labels.
* ``{"op": "trainer", "images", "labels", "queries", "iterations", "batch_size"}`` -> ``{"losses",
  "selection", "predictions", "cache"}`` from ``tflite_train.runtime.adaptation.trainer.adapt`` (TinyTrain policy,
  unlimited budget, identity augmentation: every view is the support image, as the Java driver trains on)
  on a fresh model of the same file, then ``predict`` on the queries; ``cache`` is the run's cache
  plan (``CachePlan.to_dict()``, null without training steps); with ``"save": path`` the adapted
  model's checkpoint is saved there (``save_checkpoint``).
* ``{"op": "restore_predict", "checkpoint": path, "queries"}`` -> ``{"predictions"}`` of a fresh model
  restored from the checkpoint (``restore_checkpoint``), e.g. one written by Java.
* ``{"op": "predict_logits", "checkpoint": path, "queries"}`` -> ``{"logits"}``: what ``predict`` computes
  (``adapt_job.open_adapted``, ``prediction.class_logits``) with that checkpoint.
* ``{"op": "bake", "checkpoint": path, "out": path}`` -> ``{"bytes"}``: ``tflite-train bake`` of MODEL with
  that checkpoint (``bake_job.run_bake``).
* ``{"op": "continue", "checkpoint": path, "save": path, "images", "labels", "names", "queries", "iterations",
  "batch_size", "replay_budget"}`` -> ``{"class_names", "replayed", "selection", "predictions"}``: a fresh model
  continued from the checkpoint (``continual.continue_from``; ``labels`` index ``names``) by ``adapt(...,
  start=...)`` (identity augmentation), its checkpoint with the next replay memory (``checkpoint_after``) saved.

MODEL may also be a baked classifier (``tflite-train bake``'s file): then only ``run`` is served, on its
``classify`` signature through the interpreter's standard signature runner.

Any failure is answered ``{"error": "..."}``; end of input ends the process.
"""

from __future__ import annotations

import base64
import json
import pathlib
import struct
import sys

ROOT = pathlib.Path(__file__).resolve().parents[5]
sys.path.insert(0, str(ROOT))  # this checkout's code, before any installed copy

import numpy as np  # noqa: E402

from tflite_train import contract as C  # noqa: E402
from tflite_train.runtime import AdaptConfig, adapt, predict  # noqa: E402
from tflite_train.runtime.adapt_job import open_adapted  # noqa: E402
from tflite_train.runtime.adaptation.prediction import class_logits  # noqa: E402
from tflite_train.runtime.baked.bake_job import run_bake  # noqa: E402
from tflite_train.runtime.baked.baked_classifier import BakedClassifier  # noqa: E402
from tflite_train.runtime.checkpoint.checkpoint import restore_checkpoint, save_checkpoint  # noqa: E402
from tflite_train.runtime.model.interpreter import TrainableModel  # noqa: E402
from tflite_train.runtime.model.metadata import read_metadata_buffers  # noqa: E402


def decode(tensor: dict) -> np.ndarray:
    dtype = np.dtype(tensor["dtype"]).newbyteorder("<")
    return np.frombuffer(base64.b64decode(tensor["data"]), dtype).reshape(tensor["shape"]).astype(tensor["dtype"])


def encode(value) -> dict:
    value = np.asarray(value)
    if value.dtype.name not in ("float32", "int32", "int64"):
        raise ValueError(f"unsupported dtype {value.dtype}")
    data = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes()
    return {"dtype": value.dtype.name, "shape": list(value.shape), "data": base64.b64encode(data).decode()}


def handle(path: pathlib.Path, model: TrainableModel | BakedClassifier, request: dict) -> dict:
    op = request["op"]
    if op == "run":
        inputs = {name: decode(t) for name, t in request["inputs"].items()}
        runner = model.interpreter.get_signature_runner(request["signature"]) if isinstance(model, BakedClassifier) \
            else model._runner(request["signature"])
        return {"outputs": {name: encode(v) for name, v in runner(**inputs).items()}}
    if isinstance(model, BakedClassifier):
        raise ValueError(f"a baked classifier serves run only, not {op!r}")
    if op == "episode":
        from tests.runtime.runtime_fixtures import episode_arrays, load_fashion

        xs, ys, xq, yq = episode_arrays(load_fashion(), model.input_shape, request["ways"], request["shots"],
                                        request["queries"], request["seed"])
        return {"support": encode(xs), "support_labels": encode(ys), "query": encode(xq), "query_labels": encode(yq)}
    if op == "trainer":
        fresh = TrainableModel(path)
        images, labels = decode(request["images"]), decode(request["labels"])
        config = AdaptConfig(iterations=request["iterations"], batch_size=request["batch_size"])
        result = adapt(fresh, images, labels, config, augment=lambda x, rng, cfg: x)
        if request.get("save"):
            # with the run's config and report, as `adapt` stores them: Java must read such a checkpoint too
            save_checkpoint(request["save"], fresh, result.selection, config={"adapt": config.to_dict()},
                            report=result.to_dict())
        return {"losses": [float(v) for v in result.losses],
                "selection": {name: [int(c) for c in channels] for name, channels in result.selection.channels.items()},
                "predictions": encode(predict(fresh, decode(request["queries"]))),
                "cache": None if result.cache is None else result.cache.to_dict()}
    if op == "restore_predict":
        fresh = TrainableModel(path)
        restore_checkpoint(fresh, request["checkpoint"])
        return {"predictions": encode(predict(fresh, decode(request["queries"])))}
    if op == "predict_logits":
        adapted, _ = open_adapted(path, request["checkpoint"])
        return {"logits": encode(class_logits(adapted, decode(request["queries"])))}
    if op == "bake":
        return {"bytes": run_bake(path, request["checkpoint"], request["out"]).size_bytes}
    if op == "continue":
        from tflite_train.runtime.checkpoint.checkpoint import load_checkpoint
        from tflite_train.runtime.adaptation.continual import checkpoint_after, continue_from

        fresh = TrainableModel(path)
        images = decode(request["images"])
        start, index = continue_from(load_checkpoint(request["checkpoint"]), request["names"],
                                     use_replay=request["replay_budget"] > 0)
        labels = index[decode(request["labels"])]
        config = AdaptConfig(iterations=request["iterations"], batch_size=request["batch_size"])
        result = adapt(fresh, images, labels, config, augment=lambda x, rng, cfg: x, start=start)
        after = checkpoint_after(fresh, result.selection, start, images, labels, start.class_names,
                                 replay_budget=request["replay_budget"], seed=0, views=result.views)
        save_checkpoint(request["save"], fresh, after.selection, class_names=after.class_names, arrays=after.arrays,
                        replay=after.replay)
        return {"class_names": list(after.class_names),
                "replayed": 0 if start.replay is None else start.replay.num_images,
                "selection": sorted(result.selection.layers),
                "predictions": encode(predict(fresh, decode(request["queries"])))}
    raise ValueError(f"unknown op {op!r}")


def main() -> int:
    path = pathlib.Path(sys.argv[1])
    baked = C.BAKED_METADATA_NAME in read_metadata_buffers(path)
    model = BakedClassifier(path) if baked else TrainableModel(path)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = stdin.read(4)
        if len(head) < 4:
            return 0
        (length,) = struct.unpack(">I", head)
        try:
            reply = handle(path, model, json.loads(stdin.read(length).decode()))
        except Exception as err:  # noqa: BLE001 - every failure goes back to the Java caller as an error reply
            reply = {"error": f"{type(err).__name__}: {err}"}
        data = json.dumps(reply).encode()
        stdout.write(struct.pack(">I", len(data)) + data)
        stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main())
