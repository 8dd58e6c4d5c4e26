"""Upper-block ProtoNet meta-training on cached features: episodes, training, and tf.distribute equality.

The distributed run needs two logical CPU devices, which must be configured before TensorFlow
initialises: it runs in a fresh subprocess of this file (``python tests/meta/test_upper_meta_train.py OUT``).
"""

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tflite_train.meta.feature_cache import FeatureSet
from tflite_train.meta.upper_meta_train import UpperMetaConfig, episode_sources, sample_feature_episode

ROOT = pathlib.Path(__file__).resolve().parents[2]
RTOL, ATOL = 1e-5, 1e-6


def _features(classes=8, images=4, views=3, shape=(2, 2, 192), seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1, (classes,) + shape)
    n = classes * images * views
    labels = np.repeat(np.arange(classes), images * views).astype(np.int32)
    image_index = np.repeat(np.arange(classes * images), views)
    features = (np.maximum(centres[labels] + rng.normal(0, 0.5, (n,) + shape), 0)).astype(np.float16)
    return FeatureSet("toy", features, labels, image_index)


def test_support_and_query_come_from_different_images():
    data = _features()
    rng = np.random.default_rng(0)
    for _ in range(20):
        s_rows, s_labels, q_rows, q_labels = sample_feature_episode(data, rng, 5, 5, 5)
        assert len(s_rows) == 25 and len(q_rows) == 25
        assert not set(data.image_index[s_rows]) & set(data.image_index[q_rows])
        assert np.array_equal(data.labels[s_rows].reshape(5, 5)[:, 0].repeat(5), data.labels[s_rows])
        assert np.array_equal(s_labels, np.repeat(np.arange(5), 5)) and np.array_equal(q_labels, s_labels)
    with pytest.raises(ValueError, match="9-way episodes need 9 classes"):
        sample_feature_episode(data, rng, 9, 5, 5)


def test_episode_sources_rotate_so_every_source_is_drawn():
    # E a multiple of n: e mod n at every step (the 1- and 2-source runs are unchanged)
    assert [episode_sources(t, 2, 2) for t in range(3)] == [[0, 1]] * 3
    assert [episode_sources(t, 2, 1) for t in range(2)] == [[0, 0]] * 2
    # E = 2, n = 3 (the final run on three sources): by hand, each source twice in three steps
    assert [episode_sources(t, 2, 3) for t in range(3)] == [[0, 1], [2, 0], [1, 2]]
    assert np.bincount(np.ravel([episode_sources(t, 2, 3) for t in range(30)])).tolist() == [20, 20, 20]
    with pytest.raises(ValueError, match="num_sources >= 1"):
        episode_sources(0, 2, 0)


def test_config_is_validated():
    with pytest.raises(ValueError, match="steps must be an int >= 1"):
        UpperMetaConfig(steps=0)
    with pytest.raises(ValueError, match="learning_rate"):
        UpperMetaConfig(learning_rate=0.0)


def _config():
    return UpperMetaConfig(first_block=15, steps=2, episodes_per_step=2, learning_rate=1e-2, warmup_fraction=0.0,
                           val_every=1, val_tasks=3, patience=5, keep_best=False)


def _upper():
    import keras

    from tflite_train.models.efficientnet_lite import build_efficientnet_lite0, split_lite0

    keras.utils.set_random_seed(0)
    _, upper = split_lite0(build_efficientnet_lite0(64, include_top=False), 15)
    return upper


def _run(out: pathlib.Path, strategy_name: str):
    from tflite_train.meta.run_io import make_strategy
    from tflite_train.meta.upper_meta_train import meta_train_upper

    upper = _upper()
    initial = [w.numpy().copy() for w in upper.weights]
    train = [_features(seed=1), _features(seed=2)]
    records, best = meta_train_upper(upper, train, {"toy": _features(seed=3)}, _config(), out / strategy_name,
                                     strategy=make_strategy(strategy_name))
    return initial, [w.numpy() for w in upper.weights], records


def test_two_steps_under_mirrored_strategy_equal_one_device(tmp_path):
    subprocess.run([sys.executable, __file__, str(tmp_path)], check=True, cwd=ROOT, timeout=600)
    one, two = np.load(tmp_path / "default.npz"), np.load(tmp_path / "mirrored.npz")
    assert int(two["replicas"]) == 2
    changed = 0
    for key in one.files:
        if key.startswith("w"):
            np.testing.assert_allclose(two[key], one[key], rtol=RTOL, atol=ATOL, err_msg=key)
            changed += not np.array_equal(one[key], one["initial_" + key])
    assert changed > 0  # the steps did train something


def test_meta_training_improves_validation_on_separable_toy_features(tmp_path):
    from tflite_train.meta.upper_meta_train import meta_train_upper

    upper = _upper()
    config = UpperMetaConfig(first_block=15, steps=30, learning_rate=3e-3, val_every=10, val_tasks=30, patience=5)
    records, best = meta_train_upper(upper, [_features(seed=1)], {"toy": _features(seed=1)}, config, tmp_path)
    assert best["val_acc"] >= records[0]["val_acc"]
    assert [r["step"] for r in records][:2] == [0, 10]
    assert (tmp_path / "log.jsonl").read_text().count("\n") == len(records)


def _weights(model):
    return {f"{layer.name}/{v.name}": v.numpy().copy() for layer in model.layers for v in layer.weights}


def _train(tmp_path, **changes):
    from tflite_train.meta.upper_meta_train import meta_train_upper

    upper = _upper()
    initial = _weights(upper)
    config = UpperMetaConfig(**{**_config().__dict__, "steps": 4, "val_every": 2, **changes})
    records, _ = meta_train_upper(upper, [_features(seed=1), _features(seed=2)], {"toy": _features(seed=3)}, config,
                                  tmp_path / str(sorted(changes.items())))
    return initial, _weights(upper), records


def test_bn_mode_changes_only_gamma_and_beta(tmp_path):
    initial, final, _ = _train(tmp_path, trained="bn")
    changed = {k for k in final if not np.array_equal(final[k], initial[k])}
    assert changed and all(k.endswith(("/gamma", "/beta")) for k in changed)
    assert any(k.startswith("final_bn") for k in changed)  # the head conv's BatchNorm trains too


def test_kernels_bn_mode_changes_kernels_too(tmp_path):
    initial, final, _ = _train(tmp_path)
    changed = {k for k in final if not np.array_equal(final[k], initial[k])}
    assert any(k.endswith("/kernel") for k in changed)
    assert not any("moving" in k for k in changed)  # BatchNorm statistics stay ImageNet's


def test_alpha_interpolates_the_returned_weights_and_stop_step_shortens_the_run(tmp_path):
    initial, full, records = _train(tmp_path, val_alphas=(0.0, 0.5))
    assert [r["step"] for r in records] == [0, 2, 4]
    assert set(records[-1]["by_alpha"]) == {"0", "0.5", "1"}
    assert records[-1]["by_alpha"]["0"]["val_acc"] == records[0]["val_acc"]  # alpha 0 = the start weights
    assert records[-1]["by_alpha"]["1"]["val_acc"] == records[-1]["val_acc"]
    _, _, plain = _train(tmp_path)  # validated at alpha 1 only
    assert records[-1]["by_alpha"]["1"] == {k: plain[-1][k] for k in ("val_acc", "per_source")}
    _, half, half_records = _train(tmp_path, alpha=0.5)
    assert records[-1]["by_alpha"]["0.5"]["val_acc"] == half_records[-1]["val_acc"]
    for k in full:  # the same training (same seed), written back half-way between start and trained weights
        np.testing.assert_allclose(half[k], 0.5 * initial[k] + 0.5 * full[k], rtol=RTOL, atol=ATOL, err_msg=k)
    _, start, _ = _train(tmp_path, alpha=0.0)
    assert all(np.array_equal(start[k], initial[k]) for k in initial)
    _, _, short = _train(tmp_path, stop_step=3)
    assert [r["step"] for r in short] == [0, 2, 3]
    assert short[-1]["lr"] > records[-1]["lr"]  # stopped on the 4-step schedule, before its end


def test_new_config_fields_are_validated():
    with pytest.raises(ValueError, match="trained must be one of kernels_bn, bn"):
        UpperMetaConfig(trained="film")
    with pytest.raises(ValueError, match="stop_step must be an int in 0..steps"):
        UpperMetaConfig(steps=10, stop_step=11)
    with pytest.raises(ValueError, match=r"alpha and val_alphas must be in \[0, 1\]"):
        UpperMetaConfig(val_alphas=(1.5,))


if __name__ == "__main__":
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    out = pathlib.Path(sys.argv[1])
    for name in ("default", "mirrored"):
        initial, final, _ = _run(out, name)
        from tflite_train.meta.run_io import make_strategy

        np.savez(out / f"{name}.npz", replicas=make_strategy(name).num_replicas_in_sync,
                 **{f"w{i}": w for i, w in enumerate(final)}, **{f"initial_w{i}": w for i, w in enumerate(initial)})
