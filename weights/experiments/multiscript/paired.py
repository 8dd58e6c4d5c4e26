"""Usage (repo root): .venv/bin/python weights/experiments/multiscript/paired.py BASE.weights.h5 OTHER.weights.h5 ...

Per-episode None-policy accuracies of several weight files on the same episodes; paired deltas vs the first."""
import sys, json
import numpy as np
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
from tflite_train.data.cache import load_split, read_manifest
from tflite_train.data.episodes import EpisodeConfig, sample_episodes
from tflite_train.meta.evaluate import embed, protonet_episode_accuracy
from tflite_train.models.keras_backbone import build_backbone
cache = "build/data_cache"
names = [("glyphs_multiscript", "test")] + [(n, "test") for n, e in read_manifest(cache)["datasets"].items() if e["role"] == "target"]
data = {n: load_split(cache, n, s) for n, s in names}
eps = {n: sample_episodes(d.labels, 200, 1234, EpisodeConfig()) for n, d in data.items()}
res = {}
for w in sys.argv[1:]:
    b = build_backbone("mcunet", 64); b.model.load_weights(w)
    res[w] = {}
    for n, d in data.items():
        emb = embed(b.model, d.images)
        res[w][n] = np.array([protonet_episode_accuracy(emb, e) for e in eps[n]])
base = sys.argv[1]
for w in sys.argv[1:]:
    print(w)
    for n in data:
        a = res[w][n]; d = a - res[base][n]
        print(f"  {n:26s} {100*a.mean():6.2f} +- {100*1.96*a.std(ddof=1)/np.sqrt(a.size):.2f}   paired delta {100*d.mean():+6.2f} +- {100*1.96*d.std(ddof=1)/np.sqrt(d.size):.2f}")
