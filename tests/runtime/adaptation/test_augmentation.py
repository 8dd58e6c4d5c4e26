import numpy as np
import pytest

from tflite_train.runtime.adaptation.augmentation import AugmentConfig, augment, translate, with_value_range

UNIT = (0.0, 1.0)
OFF = AugmentConfig(flip_prob=0, translate=0, brightness=0, saturation=0, contrast=0, cutout=0, value_range=UNIT)


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
    out = augment(x, np.random.default_rng(0), AugmentConfig(flip_prob=1.0, translate=0, brightness=0, saturation=0, contrast=0, cutout=0,
                                                      value_range=UNIT))
    np.testing.assert_array_equal(out, x[:, :, ::-1])


def test_full_augment_is_seeded_in_range_and_changes_images():
    x = np.random.default_rng(0).uniform(size=(4, 16, 16, 3)).astype(np.float32)
    a = augment(x, np.random.default_rng(5), AugmentConfig(value_range=UNIT))
    b = augment(x, np.random.default_rng(5), AugmentConfig(value_range=UNIT))
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.float32 and a.shape == x.shape
    assert a.min() >= 0.0 and a.max() <= 1.0
    assert not np.allclose(a, x)


def test_bad_inputs():
    with pytest.raises(ValueError, match="images"):
        augment(np.zeros((4, 4, 3)), np.random.default_rng(0), OFF)
    with pytest.raises(TypeError, match="rng"):
        augment(np.zeros((1, 4, 4, 3)), 3, OFF)
    with pytest.raises(ValueError, match="value_range is None"):
        augment(np.zeros((1, 4, 4, 3)), np.random.default_rng(0))
    with pytest.raises(ValueError, match="cutout"):
        AugmentConfig(cutout=2.0)


def test_pixels_in_0_255_survive_augmentation_in_their_own_range():
    """The bug this guards against: [0, 255] pixels clipped to a [0, 1] default range became black."""
    x = np.random.default_rng(0).uniform(0, 255, size=(4, 16, 16, 3)).astype(np.float32)
    out = augment(x, np.random.default_rng(1), with_value_range(None, (0.0, 255.0)))
    assert out.min() >= 0.0 and out.max() <= 255.0
    assert out.mean() > 50.0  # clipped to [0, 1] it would be <= 1
    # brightness is a fraction of the range: the same draw shifts [0, 255] images 255 times as far
    only_brightness = dict(flip_prob=0, translate=0, saturation=0, contrast=0, cutout=0, brightness=0.2)
    mid = np.full((1, 2, 2, 1), 0.5, np.float32)
    unit = augment(mid, np.random.default_rng(3), AugmentConfig(**only_brightness, value_range=UNIT))
    wide = augment(mid * 255, np.random.default_rng(3), AugmentConfig(**only_brightness, value_range=(0, 255)))
    np.testing.assert_allclose(wide, unit * 255, rtol=1e-5)


def test_with_value_range_fills_a_missing_range_and_refuses_another():
    assert with_value_range(None, (0, 255)).value_range == (0.0, 255.0)
    assert with_value_range(AugmentConfig(cutout=0.0), (-1, 1)) == AugmentConfig(cutout=0.0, value_range=(-1.0, 1.0))
    assert with_value_range(OFF, (0, 1)) is OFF
    with pytest.raises(ValueError, match=r"value_range \(0.0, 1.0\) differs from the model's input range \(0.0, 255.0\)"):
        with_value_range(OFF, (0, 255))
    with pytest.raises(ValueError, match="lo < hi"):
        AugmentConfig(value_range=(1, 1))


@pytest.mark.parametrize("seed", range(4))
def test_photometric_steps_equal_their_formulas_bit_for_bit(seed):
    """The in-place brightness, saturation, contrast and clip equal the module docstring's formulas evaluated
    out of place, with the generator's draws in the same order (float32 throughout)."""
    lo, hi = 0.0, 255.0
    x = np.random.default_rng(100 + seed).uniform(-20, 275, size=(3, 5, 6, 3)).astype(np.float32)
    config = AugmentConfig(flip_prob=0.0, translate=0.0, cutout=0.0, value_range=(lo, hi))
    got = augment(x, np.random.default_rng(seed), config)
    rng = np.random.default_rng(seed)
    y = x + (rng.uniform(-0.2, 0.2, size=(3, 1, 1, 1)) * (hi - lo)).astype(np.float32)
    m = y.mean(axis=3, keepdims=True)
    y = m + rng.uniform(0.7, 1.3, size=(3, 1, 1, 1)).astype(np.float32) * (y - m)
    mu = y.mean(axis=(1, 2, 3), keepdims=True)
    y = mu + rng.uniform(0.7, 1.3, size=(3, 1, 1, 1)).astype(np.float32) * (y - mu)
    want = np.clip(y, lo, hi).astype(np.float32)
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert not np.shares_memory(got, x)


def test_cutout_fills_with_the_top_left_pixel_after_the_flip():
    """fill=None: the cutout square takes each image's top-left pixel after its flip, i.e. the original's top-right
    one under flip_prob 1, not its top-left one (by hand: the centre (cy, cx) drawn after the flip draw, as augment
    draws them)."""
    x = np.arange(2 * 6 * 7 * 1, dtype=np.float32).reshape(2, 6, 7, 1)
    config = AugmentConfig(flip_prob=1.0, translate=0.0, brightness=0.0, saturation=0.0, contrast=0.0, cutout=0.25,
                           value_range=(0.0, 100.0))
    got = augment(x, np.random.default_rng(5), config)
    rng = np.random.default_rng(5)
    rng.uniform(size=2)  # the flip draw
    cy, cx = rng.integers(0, 6, size=2), rng.integers(0, 7, size=2)
    for i in range(2):
        assert got[i, cy[i], cx[i], 0] == x[i, 0, 6, 0]  # the original's top-right pixel
