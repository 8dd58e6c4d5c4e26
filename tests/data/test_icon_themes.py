"""The icon-theme source on a tiny synthetic theme tree (no network, no package install)."""

import os
import pathlib

import numpy as np
import pytest
from PIL import Image, ImageDraw

from tflite_train.data import icon_themes as it
from tflite_train.data.cache import DEB_DOWNLOADS
from tflite_train.data.dataset import SourceUnavailable

CACHE = pathlib.Path(os.environ.get("TFLITE_TRAIN_CACHE", pathlib.Path(__file__).resolve().parents[2] / "build" / "data_cache"))


def _drawing(seed: int, size: int = 64) -> Image.Image:
    """A distinct RGBA drawing: a few seeded coloured polygons on transparency."""
    rng = np.random.default_rng(seed)
    image = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    for _ in range(4):
        points = [tuple(int(v) for v in rng.integers(0, size, 2)) for _ in range(4)]
        draw.polygon(points, fill=tuple(int(v) for v in rng.integers(0, 200, 3)) + (255,))
    return image


def _put(root: pathlib.Path, rel: str, image: Image.Image) -> pathlib.Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path


def _themes(download_dir: pathlib.Path) -> tuple[it.IconTheme, ...]:
    """Four themes, two layouts (size/context and context/size), the cases of the module docstring."""
    themes = tuple(it.IconTheme(f"pkg-{t}", "1.0-1", "test", f"usr/share/icons/{t}") for t in "ABCD")
    roots = {t.name: download_dir / t.package / t.theme_dir for t in themes}

    def rel(theme: str, name: str, size: int = 64, context: str = "apps") -> str:
        return f"{size}x{size}/{context}/{name}.png" if theme in "AC" else f"{context}/{size}/{name}.png"

    for k, t in enumerate("ABCD"):  # alpha: 4 distinct drawings
        _put(roots[t], rel(t, "alpha"), _drawing(100 + k))
    _put(roots["A"], rel("A", "alpha", 32), _drawing(999, 32))  # a smaller size is ignored
    for t in "ABC":
        (roots[t] / rel(t, "alias")).symlink_to(roots[t] / rel(t, "alpha"))  # aliases are symbolic links: not read
    for k, t in enumerate("ABC"):  # beta: 3 drawings
        _put(roots[t], rel(t, "beta"), _drawing(200 + k))
    for k, t in enumerate("AB"):  # gamma: only 2 themes
        _put(roots[t], rel(t, "gamma"), _drawing(300 + k))
    for k, t in enumerate("ABC"):  # delta: C re-uses A's artwork -> 2 distinct -> dropped
        _put(roots[t], rel(t, "delta"), _drawing(400 + (0 if t == "C" else k)).rotate(0))
    for k, t in enumerate("ABCD"):  # epsilon: D is a near-copy of a Tux Paint stamp -> 3 kept
        _put(roots[t], rel(t, "epsilon"), _drawing(500 + k))
    for k, t in enumerate("ABC"):  # zeta: A's file is byte-identical to A's alpha -> the class is dropped
        if t == "A":
            (roots[t] / rel(t, "zeta")).write_bytes((roots[t] / rel(t, "alpha")).read_bytes())
        else:
            _put(roots[t], rel(t, "zeta"), _drawing(600 + k))
    for k, t in enumerate("ABC"):  # penguin-cursor: shares a word with a stamp -> excluded by name
        _put(roots[t], rel(t, "penguin-cursor"), _drawing(700 + k))
    for k, t in enumerate("ABC"):  # eta: B's drawing is blank (white on transparency)
        _put(roots[t], rel(t, "eta"), Image.new("RGBA", (64, 64), (255, 255, 255, 255)) if t == "B" else _drawing(800 + k))
    for k, t in enumerate("ABC"):  # skipped everywhere: symbolic names, skipped folders, non-square strips
        _put(roots[t], rel(t, "theta-symbolic"), _drawing(900 + k))
        _put(roots[t], rel(t, "iota", context="animations"), _drawing(910 + k))
        _put(roots[t], rel(t, "kappa"), _drawing(920 + k).resize((64, 32)))
    return themes


@pytest.fixture
def tree(tmp_path):
    download_dir = tmp_path / "deb"
    themes = _themes(download_dir)
    stamps = tmp_path / "stamps" / "animals" / "birds"
    stamps.mkdir(parents=True)
    epsilon_d = download_dir / "pkg-D" / "usr/share/icons/D" / "apps/64/epsilon.png"
    with Image.open(epsilon_d) as image:  # the stamp: the same drawing, shifted by 1 px and brighter
        shifted = Image.new("RGBA", image.size, (0, 0, 0, 0))
        shifted.paste(image, (1, 0))
        rgb = np.asarray(shifted).astype(np.int32)
        rgb[..., :3] = np.minimum(rgb[..., :3] + 10, 255)
        Image.fromarray(rgb.astype(np.uint8), "RGBA").save(stamps / "penguin.png")
    return download_dir, themes, tmp_path / "stamps"


def test_icon_size_reads_both_layouts_and_skips_folders():
    P = pathlib.PurePosixPath
    assert it.icon_size(P("48x48/apps/x.png")) == 48
    assert it.icon_size(P("apps/64/x.png")) == 64
    assert it.icon_size(P("base/128x128/places/x.png")) == 128
    assert it.icon_size(P("48x32/apps/x.png")) is None
    assert it.icon_size(P("apps/x.png")) is None
    assert it.icon_size(P("32x32/animations/x.png")) is None
    assert it.icon_size(P("apps/symbolic/x.png")) is None
    assert it.icon_size(P("scalable/apps/x.png")) is None


def test_scan_theme_takes_regular_pngs_at_the_chosen_size(tree):
    download_dir, themes, _ = tree
    a = themes[0]
    found = it.scan_theme(download_dir / a.package / a.theme_dir, min_size=32, target_size=64)
    assert found["alpha"].parts[-3] == "64x64"  # 64 chosen over 32
    assert "alias" not in found and "theta-symbolic" not in found and "iota" not in found
    # without a size >= target, the largest >= min_size is taken; below min_size nothing
    root = download_dir / "x"
    _put(root, "16x16/apps/s.png", _drawing(1, 16))
    _put(root, "32x32/apps/s.png", _drawing(1, 32))
    _put(root, "48x48/apps/s.png", _drawing(1, 48))
    _put(root, "16x16/apps/tiny.png", _drawing(2, 16))
    found = it.scan_theme(root, min_size=32, target_size=64)
    assert found["s"].parts[-3] == "48x48" and "tiny" not in found


def test_candidate_classes_need_min_themes():
    per_theme = {"A": {"a": 1, "b": 2, "c": 3}, "B": {"a": 4, "b": 5}, "C": {"a": 6}}
    assert it.candidate_classes(per_theme, 2) == [("a", {"A": 1, "B": 4, "C": 6}), ("b", {"A": 2, "B": 5})]
    assert it.candidate_classes(per_theme, 3) == [("a", {"A": 1, "B": 4, "C": 6})]


def test_average_hash_by_hand():
    image = np.full((1, 16, 16, 3), 255, np.uint8)
    image[0, :, :8] = 0  # left half black
    h = it.average_hash(image).reshape(8, 8)
    assert not h[:, :4].any() and h[:, 4:].all()
    assert it.hamming_distances(h.reshape(1, 64), ~h.reshape(1, 64)).tolist() == [[64]]
    assert it.hamming_distances(h.reshape(1, 64), h.reshape(1, 64)).tolist() == [[0]]
    with pytest.raises(ValueError, match="multiples of 8"):
        it.average_hash(np.zeros((1, 12, 12, 3), np.uint8))


def test_near_duplicates_need_hash_and_thumbnail_agreement():
    base = np.full((64, 64, 3), 255, np.uint8)
    black = base.copy()
    black[16:48, 16:48] = 0
    red = base.copy()
    red[16:48, 16:48] = (255, 0, 0)  # darker than white where black is: the same average hash
    shifted = np.roll(black, 1, axis=1)
    brighter = np.minimum(black.astype(int) + 12, 255).astype(np.uint8)
    inverse = 255 - black
    assert it.hamming_distances(it.average_hash(red[None]), it.average_hash(black[None]))[0, 0] == 0
    flags = it.near_duplicates(np.stack([shifted, brighter, red, inverse]), black[None], max_hash_distance=4, max_rms=0.08)
    assert flags.tolist() == [True, True, False, False]
    assert it.near_duplicates(black[None], np.zeros((0, 64, 64, 3), np.uint8), 4, 0.08).tolist() == [False]


def test_load_icon_themes_builds_deduplicated_classes(tree, caplog):
    download_dir, themes, stamps = tree
    config = it.IconThemesConfig(themes=themes)
    with caplog.at_level("INFO"):
        data = it.load_icon_themes(32, download_dir=download_dir, config=config, stamps_root=stamps)
    assert data.class_names == ("alpha", "beta", "epsilon")
    assert data.class_counts().tolist() == [4, 3, 3]
    assert data.images.shape == (10, 32, 32, 3) and data.images.dtype == np.uint8
    assert (data.images[:, 0, 0] == 255).all()  # composited on white
    message = caplog.records[-1].getMessage()
    for part in ("excluded_by_target_word 1", "blank 1", "near_duplicate_of_target 1", "near_duplicate_within_class 1",
                 "class_same_bytes_as_earlier 1", "class_too_few_themes 3"):  # delta, eta, kappa (non-square: unread)
        assert part in message, message
    # deterministic: the same tree gives the same bytes
    again = it.load_icon_themes(32, download_dir=download_dir, config=config, stamps_root=stamps)
    assert np.array_equal(again.images, data.images) and np.array_equal(again.labels, data.labels)


def test_without_the_stamp_the_leaked_drawing_stays(tree):
    download_dir, themes, _ = tree
    config = it.IconThemesConfig(themes=themes, exclude_target_words=False)
    data = it.load_icon_themes(32, download_dir=download_dir, config=config,
                               reference_images=np.zeros((0, 32, 32, 3), np.uint8))
    assert data.class_names == ("alpha", "beta", "epsilon", "penguin-cursor")
    assert data.class_counts().tolist() == [4, 3, 4, 3]


def test_missing_theme_and_config_errors(tmp_path):
    with pytest.raises(SourceUnavailable, match="make icon-data"):
        it.load_icon_themes(32, download_dir=tmp_path, stamps_root=tmp_path)
    with pytest.raises(ValueError, match="min_themes must be >= 2"):
        it.IconThemesConfig(min_themes=1)
    with pytest.raises(ValueError, match="max_hash_distance"):
        it.IconThemesConfig(max_hash_distance=64)
    with pytest.raises(ValueError, match="min_size <= target_size"):
        it.IconThemesConfig(min_size=128)


def test_every_theme_is_pinned_with_a_licence():
    for theme in it.THEMES:
        assert theme.version and theme.licence and theme.spec == f"{theme.package}={theme.version}"


@pytest.mark.skipif(not (CACHE / DEB_DOWNLOADS / it.THEMES[0].package).exists(), reason="icon themes not fetched (make icon-data)")
def test_real_icon_themes_have_several_themes_per_class():
    data = it.load_icon_themes(64, download_dir=CACHE / DEB_DOWNLOADS)
    assert data.num_classes > 200 and data.class_counts().min() >= 3
