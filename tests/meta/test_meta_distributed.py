"""Meta-training under tf.distribute: MirroredStrategy over two logical CPU devices equals one device.

Logical devices must be configured before TensorFlow initialises, so the comparison runs in a fresh
subprocess (``python -m tests.meta.test_meta_distributed OUT``) that writes both runs' results.
"""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Same episodes, same initial weights: the two runs differ only in float summation order (the
# all-reduce adds the replicas' gradients where one device adds the episodes' losses).
RTOL, ATOL = 1e-5, 1e-6


def _run_both(out: pathlib.Path) -> None:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    sys.path.insert(0, str(ROOT / "tests" / "meta"))
    from test_meta import NO_AUG, _toy_data

    from tflite_train.data.episodes import EpisodeConfig
    from tflite_train.meta import MetaTrainConfig, meta_train

    config = MetaTrainConfig(backbone="tiny", image_size=16, episodes=2, episodes_per_step=2,
                             episode=EpisodeConfig(ways=5, shots=2, queries=3), augment=NO_AUG, log_every=1)
    from tflite_train.models import build_backbone

    initial = build_backbone(config.backbone, config.image_size, seed=config.seed)  # what meta_train starts from
    np.savez(out / "initial.npz", **{w.path: np.asarray(w.numpy()) for w in initial.model.weights})
    results = {}
    for name, strategy in (("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])),
                           ("single", tf.distribute.get_strategy())):
        backbone, head, records = meta_train(_toy_data(), config, out / name, strategy=strategy)
        weights = {w.path: np.asarray(w.numpy()) for w in backbone.model.weights}
        if name == "mirrored":  # every replica holds the same copy of every variable
            for w in backbone.model.weights:
                copies = [np.asarray(c) for c in getattr(w.value, "values", [w.value])]
                assert len(copies) == 2 and all(np.array_equal(copies[0], c) for c in copies), w.path
        np.savez(out / f"{name}.npz", **weights, head_scale=head.scale.numpy(), head_bias=head.bias.numpy())
        results[name] = {"replicas": strategy.num_replicas_in_sync, "records": records}
    (out / "results.json").write_text(json.dumps(results))


@pytest.mark.slow
def test_two_mirrored_steps_on_two_devices_equal_the_single_device_steps(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, __file__, str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["mirrored"]["replicas"] == 2 and results["single"]["replicas"] == 1
    mirrored, single = results["mirrored"]["records"], results["single"]["records"]
    assert [r["episode"] for r in mirrored] == [r["episode"] for r in single] == [1, 2]
    for m, s in zip(mirrored, single):
        np.testing.assert_allclose([m["loss"], m["acc"], m["scale"], m["bias"]],
                                   [s["loss"], s["acc"], s["scale"], s["bias"]], rtol=RTOL, atol=ATOL)
    a, b = np.load(tmp_path / "mirrored.npz"), np.load(tmp_path / "single.npz")
    assert sorted(a.files) == sorted(b.files) and len(a.files) > 10
    for key in a.files:
        np.testing.assert_allclose(a[key], b[key], rtol=RTOL, atol=ATOL, err_msg=key)
    start = np.load(tmp_path / "initial.npz")
    moved = [k for k in start.files if not np.allclose(start[k], b[k], rtol=1e-3, atol=1e-4)]
    assert len(moved) > len(start.files) // 2  # the steps changed most variables (kernels, BN statistics)


if __name__ == "__main__":
    _run_both(pathlib.Path(sys.argv[1]))
