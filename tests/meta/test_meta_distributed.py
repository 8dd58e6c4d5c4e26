"""Meta-training under tf.distribute equals one device: MirroredStrategy over two logical CPU devices,
and MultiWorkerMirroredStrategy over two worker processes on this machine (loopback ports only).

Logical devices and TF_CONFIG must be set before TensorFlow initialises, so each run is a fresh
subprocess of this file (``python tests/meta/test_meta_distributed.py MODE OUT [INDEX PORTS]``).
"""

import json
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Same episodes, same initial weights: the two runs differ only in float summation order (the
# all-reduce adds the replicas' gradients where one device adds the episodes' losses).
RTOL, ATOL = 1e-5, 1e-6


def _config():
    from tests.meta.test_meta import NO_AUG, _toy_data

    from tflite_train.data.episodes import EpisodeConfig
    from tflite_train.meta import MetaTrainConfig

    config = MetaTrainConfig(backbone="tiny", image_size=16, episodes=2, episodes_per_step=2,
                             episode=EpisodeConfig(ways=5, shots=2, queries=3), augment=NO_AUG, log_every=1)
    return config, _toy_data()


def _run_worker(out: pathlib.Path, index: int, ports: list[int]) -> None:
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                                          "task": {"type": "worker", "index": index}})
    from tflite_train.meta import make_strategy, meta_train

    config, data = _config()
    strategy = make_strategy("multi_worker")
    backbone, head, records = meta_train(data, config, out / f"worker{index}", strategy=strategy)
    np.savez(out / f"worker{index}.npz", **{w.path: np.asarray(w.numpy()) for w in backbone.model.weights},
             head_scale=head.scale.numpy(), head_bias=head.bias.numpy())
    (out / f"worker{index}.json").write_text(json.dumps({"replicas": strategy.num_replicas_in_sync, "records": records}))


def _run_both(out: pathlib.Path) -> None:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from tflite_train.meta import meta_train

    config, data = _config()
    from tflite_train.models import build_backbone

    initial = build_backbone(config.backbone, config.image_size, seed=config.seed)  # what meta_train starts from
    np.savez(out / "initial.npz", **{w.path: np.asarray(w.numpy()) for w in initial.model.weights})
    results = {}
    for name, strategy in (("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])),
                           ("single", tf.distribute.get_strategy())):
        backbone, head, records = meta_train(data, config, out / name, strategy=strategy)
        weights = {w.path: np.asarray(w.numpy()) for w in backbone.model.weights}
        if name == "mirrored":  # every replica holds the same copy of every variable
            for w in backbone.model.weights:
                copies = [np.asarray(c) for c in getattr(w.value, "values", [w.value])]
                assert len(copies) == 2 and all(np.array_equal(copies[0], c) for c in copies), w.path
        np.savez(out / f"{name}.npz", **weights, head_scale=head.scale.numpy(), head_bias=head.bias.numpy())
        results[name] = {"replicas": strategy.num_replicas_in_sync, "records": records}
    (out / "results.json").write_text(json.dumps(results))


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
def test_two_mirrored_steps_on_two_devices_equal_the_single_device_steps(tmp_path):
    proc = subprocess.run([sys.executable, __file__, "mirrored", str(tmp_path)], cwd=ROOT, env=_env(),
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


@pytest.mark.slow
def test_two_workers_equal_the_single_device_steps(tmp_path):
    ports = _free_ports(2)
    workers = [subprocess.Popen([sys.executable, __file__, "worker", str(tmp_path), str(i), *map(str, ports)],
                                cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
               for i in range(2)]
    try:
        errors = [w.communicate(timeout=300)[1] for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    assert all(w.returncode == 0 for w in workers), [e[-2000:] for e in errors]
    single = subprocess.run([sys.executable, __file__, "mirrored", str(tmp_path / "ref")], cwd=ROOT, env=_env(),
                            capture_output=True, text=True, timeout=600)
    assert single.returncode == 0, single.stderr[-3000:]
    reference = np.load(tmp_path / "ref" / "single.npz")
    ref_records = json.loads((tmp_path / "ref" / "results.json").read_text())["single"]["records"]
    for i in range(2):
        result = json.loads((tmp_path / f"worker{i}.json").read_text())
        assert result["replicas"] == 2
        np.testing.assert_allclose([r["loss"] for r in result["records"]], [r["loss"] for r in ref_records],
                                   rtol=RTOL, atol=ATOL)
        weights = np.load(tmp_path / f"worker{i}.npz")
        assert sorted(weights.files) == sorted(reference.files)
        for key in weights.files:
            np.testing.assert_allclose(weights[key], reference[key], rtol=RTOL, atol=ATOL, err_msg=f"worker {i} {key}")


def test_multi_worker_needs_tf_config_and_episodes_per_step_is_checked(monkeypatch):
    from tflite_train.meta import MetaTrainConfig, make_strategy
    from tflite_train.meta.meta_train import _episodes_per_replica

    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        make_strategy("multi_worker")
    with pytest.raises(ValueError, match="episodes_per_step"):
        MetaTrainConfig(episodes_per_step=0)
    with pytest.raises(ValueError, match=r"episodes_per_step \(3\) must be a multiple of the strategy's 2 replicas"):
        _episodes_per_replica(3, 2)
    assert _episodes_per_replica(4, 2) == 2


if __name__ == "__main__":
    mode, out = sys.argv[1], pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    if mode == "worker":
        _run_worker(out, int(sys.argv[3]), [int(p) for p in sys.argv[4:]])
    else:
        _run_both(out)
