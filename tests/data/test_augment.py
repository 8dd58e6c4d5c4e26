import numpy as np
import pytest

from tflite_train.data.augment import AugmentConfig, augment, translate

OFF = AugmentConfig(flip_prob=0, translate=0, brightness=0, saturation=0, contrast=0, cutout=0)


def test_disabled_is_identity():
    x = np.random.default_rng(0).uniform(size=(3, 8, 8, 3)).astype(np.float32)
    np.testing.assert_array_equal(augment(x, np.random.default_rng(1), OFF), x)


def test_translate_by_hand():
    x = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    out = translate(x, np.array([[1, -1]]), np.array([[-1.0]], np.float32))
    expected = np.array([[-1, -1, -1], [1, 2, -1], [4, 5, -1]], np.float32)
    np.testing.assert_array_equal(out[0, :, :, 0], expected)


def test_flip_always():
    x = np.random.default_rng(0).uniform(size=(2, 4, 4, 3)).astype(np.float32)
    out = augment(x, np.random.default_rng(0), AugmentConfig(flip_prob=1.0, translate=0, brightness=0, saturation=0, contrast=0, cutout=0))
    np.testing.assert_array_equal(out, x[:, :, ::-1])


def test_full_augment_is_seeded_in_range_and_changes_images():
    x = np.random.default_rng(0).uniform(size=(4, 16, 16, 3)).astype(np.float32)
    a = augment(x, np.random.default_rng(5))
    b = augment(x, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.float32 and a.shape == x.shape
    assert a.min() >= 0.0 and a.max() <= 1.0
    assert not np.allclose(a, x)


def test_bad_inputs():
    with pytest.raises(ValueError, match="images"):
        augment(np.zeros((4, 4, 3)), np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng"):
        augment(np.zeros((1, 4, 4, 3)), 3)
    with pytest.raises(ValueError, match="cutout"):
        AugmentConfig(cutout=2.0)
