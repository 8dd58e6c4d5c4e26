"""The line-icon target: name rule, drop rules, vendor count on synthetic tarballs, and (when fetched) the real packages."""

import base64
import hashlib
import io
import os
import pathlib
import shutil
import tarfile

import numpy as np
import pytest

from tflite_train.data import line_icons as li
from tflite_train.data.cache import DEB_DOWNLOADS, DOWNLOADS, default_datasets
from tflite_train.data.dataset import SourceUnavailable
from tflite_train.data.icon_themes import THEMES
from tflite_train.data.line_icon_vendors import ScopedNpmPackage
from tflite_train.data.svg_raster import RSVG

CACHE = pathlib.Path(os.environ.get("TFLITE_TRAIN_CACHE", pathlib.Path(__file__).resolve().parents[2] / "build" / "data_cache"))
VENDOR = {v.key: v for v in li.VENDORS}
needs_rsvg = pytest.mark.skipif(shutil.which(RSVG) is None, reason="rsvg-convert not installed (apt-get install librsvg2-bin)")


def test_icon_name_rule_per_vendor():
    cases = {
        "remixicon": {"package/icons/System/home-line.svg": "home", "package/icons/System/home-fill.svg": None,
                      "package/icons/Editor/bold.svg": "bold", "package/icons/System/Menu-2-Line.svg": "menu-2",
                      "package/icons/System/home-line.png": None},
        "ionicons": {"package/dist/svg/home-outline.svg": "home", "package/dist/svg/home.svg": None,
                     "package/dist/svg/home-sharp.svg": None, "package/dist/ionicons/svg/home-outline.svg": None},
        "octicons": {"package/build/svg/home-24.svg": "home", "package/build/svg/home-16.svg": None},
        "bootstrap": {"package/icons/house.svg": "house", "package/icons/house-fill.svg": None},
        "tabler": {"package/icons/outline/Home.svg": "home", "package/icons/filled/home.svg": None},
        "lucide": {"package/icons/wallet.svg": "wallet", "package/icons/extra/wallet.svg": None},
        "eva": {"package/outline/svg/grid-outline.svg": "grid", "package/fill/svg/grid.svg": None},
        "heroicons": {"package/24/outline/cog.svg": "cog", "package/24/solid/cog.svg": None,
                      "package/20/solid/cog.svg": None},
        "phosphor": {"package/assets/regular/gear.svg": "gear", "package/assets/fill/gear-fill.svg": None},
    }
    for vendor, members in cases.items():
        for member, name in members.items():
            assert VENDOR[vendor].icon_name(member) == name, (vendor, member)
    # Remix Icon: a "-line" drawing wins over a plain single-style file of the same name.
    remix = VENDOR["remixicon"]
    assert remix.drawings(["package/icons/Editor/bold.svg", "package/icons/Editor/bold-line.svg",
                           "package/icons/Editor/italic.svg"]) == {"bold": "package/icons/Editor/bold-line.svg",
                                                                  "italic": "package/icons/Editor/italic.svg"}


def test_brand_markers():
    assert VENDOR["tabler"].brand("package/icons/outline/brand-github.svg") == "github"
    assert VENDOR["ionicons"].brand("package/dist/svg/logo-github.svg") == "github"
    assert VENDOR["phosphor"].brand("package/assets/regular/github-logo.svg") == "github"
    assert VENDOR["remixicon"].brand("package/icons/Logos/github-line.svg") == "github"
    assert VENDOR["remixicon"].brand("package/icons/System/home-line.svg") is None
    assert VENDOR["lucide"].brand("package/icons/github.svg") is None


def test_name_words_and_drop_rules_by_hand():
    assert li.name_words("chevron-down") == {"chevron"}  # "down" is a stop word
    assert li.name_words("bookmarks_list") == {"bookmark", "list"}
    assert li.name_words("qr-code") == {"code"}
    assert li.name_words("at") == frozenset()
    assert li.is_numbered_variant("menu-2") and li.is_numbered_variant("dice-6")
    assert not li.is_numbered_variant("grid-3x3") and not li.is_numbered_variant("menu")
    words = {"emoji_word": frozenset({"house", "cat"}), "icon_theme_word": frozenset({"folder", "cat"}),
             "glyph_word": frozenset({"letter"})}
    brands = frozenset({"github"})
    expected = {
        "menu-2": "numbered_variant",
        "github": "brand_logo",
        "x": "no_name_word",
        "house-door": "emoji_word",
        "cat-folder": "emoji_word",  # the first rule that matches
        "folder-open": "icon_theme_word",
        "letter-case": "glyph_word",
        "chevron-down": None,
        "wallet": None,
    }
    for name, reason in expected.items():
        assert li.drop_reason(name, brands, words) == reason, name
    assert li.drop_reason("house-door", brands, {}) is None  # rules 4-6 off


def test_glyph_words_cover_scripts_and_letter_names():
    words = li.glyph_words()
    assert {"latin", "greek", "cyrillic", "letter", "capital", "digit", "alpha", "omega", "runic", "hebrew"} <= words


def test_every_package_is_pinned_and_scoped_tarballs_are_named_as_npm_pack_does():
    for pkg in li.PACKAGES.values():
        assert pkg.integrity.startswith("sha512-") and len(pkg.integrity) == 7 + 88
        assert pkg.code_licence and pkg.image_licence
    assert li.PACKAGES["tabler"].tarball == "tabler-icons-3.52.0.tgz"
    assert li.PACKAGES["octicons"].tarball == "primer-octicons-19.42.0.tgz"
    assert li.PACKAGES["lucide"].tarball == "lucide-static-1.62.0.tgz"
    assert {v.key for v in li.VENDORS} == set(li.PACKAGES)


def test_registered_as_a_target_with_the_npm_downloads():
    spec = {s.name: s for s in default_datasets()}["line_icons"]
    assert spec.role == "target" and spec.downloads == DOWNLOADS and not spec.required
    assert all(p.spec in spec.origin for p in li.PACKAGES.values())


# --- synthetic tarballs -----------------------------------------------------------------------------------------

def _svg(body: str) -> bytes:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="currentColor" '
            f'stroke-width="2">{body}</svg>').encode()


SHAPES = {  # distinct drawings; the same key gives the same bytes
    "circle": _svg('<circle cx="12" cy="12" r="9"/>'),
    "square": _svg('<rect x="3" y="3" width="18" height="18"/>'),
    "cross": _svg('<path d="M4 4L20 20M20 4L4 20"/>'),
    "plus": _svg('<path d="M12 3V21M3 12H21"/>'),
    "tri": _svg('<path d="M12 3L21 20H3Z"/>'),
    "zig": _svg('<path d="M3 6L9 18L15 6L21 18"/>'),
    "blank": _svg(""),
}


def _tarball(path: pathlib.Path, members: dict[str, bytes]) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())
    return "sha512-" + base64.b64encode(hashlib.sha512(buf.getvalue()).digest()).decode()


@pytest.fixture
def synthetic(tmp_path, monkeypatch):
    """Four vendors (two layouts); classes: wallet (4 vendors), anvil and sofa (3), kiosk (2: too few), lamp-2 (numbered),
    github (a brand by tabler's marker), badge (3, tabler's a copy of lucide's: too few after deduplication),
    easel (3, one blank: too few)."""
    vendors = (VENDOR["lucide"], VENDOR["tabler"], VENDOR["ionicons"], VENDOR["remixicon"])
    files = {
        "lucide": {"anvil": "zig", "wallet": "circle", "sofa": "square", "kiosk": "cross", "lamp-2": "circle", "github": "plus",
                   "badge": "tri", "easel": "blank"},
        "tabler": {"anvil": "circle", "wallet": "square", "sofa": "cross", "kiosk": "plus", "lamp-2": "square", "github": "tri",
                   "brand-github": "tri", "badge": "tri", "easel": "circle"},
        "ionicons": {"anvil": "tri", "wallet": "cross", "sofa": "plus", "lamp-2": "cross", "github": "circle", "badge": "zig",
                     "easel": "square"},
        "remixicon": {"wallet": "plus"},
    }
    paths = {"lucide": "package/icons/{}.svg", "tabler": "package/icons/outline/{}.svg",
             "ionicons": "package/dist/svg/{}-outline.svg", "remixicon": "package/icons/System/{}-line.svg"}
    npm_dir = tmp_path / "npm"
    npm_dir.mkdir()
    packages = {}
    for v in vendors:
        members = {paths[v.key].format(name): SHAPES[shape] for name, shape in files[v.key].items()}
        members["package/README.md"] = b"not an icon"
        pkg = ScopedNpmPackage(f"@test/{v.key}", "1.0.0", "", "MIT", "MIT")
        integrity = _tarball(npm_dir / pkg.tarball, members)
        packages[v.key] = ScopedNpmPackage(pkg.name, pkg.version, integrity, "MIT", "MIT")
    monkeypatch.setattr(li, "PACKAGES", packages)
    config = li.LineIconsConfig(vendors=vendors, exclude_source_words=False)
    return npm_dir, config


def test_vendor_count_numbered_and_brand_rules_on_synthetic_tarballs(synthetic):
    npm_dir, config = synthetic
    classes, counts = li.line_icon_classes(npm_dir, config=config)
    assert [name for name, _ in classes] == ["anvil", "badge", "easel", "sofa", "wallet"]
    assert list(dict(classes)["wallet"]) == ["lucide", "tabler", "ionicons", "remixicon"]  # vendor order
    assert counts == {"names_with_enough_vendors": 7, "numbered_variant": 1, "brand_logo": 1, "no_name_word": 0,
                      "emoji_word": 0, "icon_theme_word": 0, "glyph_word": 0}
    with pytest.raises(ValueError, match="deb_dir"):
        li.line_icon_classes(npm_dir, config=li.LineIconsConfig(vendors=config.vendors))


@needs_rsvg
def test_load_on_synthetic_tarballs_dedups_and_is_deterministic(synthetic, caplog):
    npm_dir, config = synthetic
    caplog.set_level("INFO", logger=li.log.name)
    data = li.load_line_icons(32, download_dir=npm_dir, config=config)
    assert data.class_names == ("anvil", "sofa", "wallet")  # badge: a copy dropped -> 2; easel: a blank dropped -> 2
    assert list(data.class_counts()) == [3, 3, 4]
    assert data.images.shape == (10, 32, 32, 3) and data.images.dtype == np.uint8
    assert np.array_equal(data.labels, [0, 0, 0, 1, 1, 1, 2, 2, 2, 2])
    assert "near_duplicate_within_class 1" in caplog.text and "blank 1" in caplog.text
    assert "class_too_few_vendors 2" in caplog.text
    again = li.load_line_icons(32, download_dir=npm_dir, config=config)
    assert np.array_equal(again.images, data.images) and np.array_equal(again.labels, data.labels)
    capped = li.load_line_icons(32, download_dir=npm_dir, config=li.LineIconsConfig(
        vendors=config.vendors, exclude_source_words=False, max_classes=2))
    assert capped.num_classes == 2 and set(capped.class_names) < set(data.class_names)
    assert "over_cap 1" in caplog.text


def test_missing_tarball_names_the_command(tmp_path):
    with pytest.raises(SourceUnavailable, match="npm pack lucide-static@1.62.0"):
        li.line_icon_classes(tmp_path, deb_dir=tmp_path)


@needs_rsvg
def test_render_centres_black_strokes_on_white():
    image = li.render_icon(SHAPES["square"].replace(b"currentColor", b"currentcolor"), 64, margin=0.1)
    assert image.shape == (64, 64, 3) and image.dtype == np.uint8
    assert (image[..., 0] == image[..., 1]).all() and (image[..., 0] == image[..., 2]).all()
    dark = np.argwhere(image[..., 0] < 128)
    assert dark.min() >= 5 and dark.max() <= 58  # ink box inside the ~6 px margin, centred
    assert image[0, 0, 0] == 255 and image[..., 0].min() < 40
    assert li.render_icon(SHAPES["blank"], 64) is None


# --- the real packages ------------------------------------------------------------------------------------------

REAL = all((CACHE / DOWNLOADS / p.tarball).exists() for p in li.PACKAGES.values())
DEB = all((CACHE / DEB_DOWNLOADS / t.package).is_dir() for t in THEMES)


@pytest.mark.skipif(not REAL, reason="line-icon npm tarballs not fetched (make npm-data)")
@needs_rsvg
def test_real_rendered_sample_is_dark_strokes_on_white():
    member = "package/icons/wallet.svg"
    from tflite_train.data.npm_packages import read_members

    svg = read_members(li.PACKAGES["lucide"], CACHE / DOWNLOADS, lambda n: n == member)[member]
    assert b"currentColor" in svg
    image = li.render_icon(svg, 64)
    assert image.shape == (64, 64, 3) and image.dtype == np.uint8
    grey = image[..., 0]
    assert np.all(grey[:4] == 255) and np.all(grey[:, :4] == 255)  # white margin
    assert grey.min() < 40 and 0.05 < np.mean(grey < 128) < 0.5  # dark strokes, mostly white


@pytest.mark.skipif(not (REAL and DEB), reason="line-icon npm tarballs or icon-theme packages not fetched (make data)")
def test_real_classes_have_three_vendors_and_no_source_word():
    npm_dir = CACHE / DOWNLOADS
    classes, counts = li.line_icon_classes(npm_dir, deb_dir=CACHE / DEB_DOWNLOADS)
    assert len(classes) >= 40
    assert all(len(drawings) >= 3 for _, drawings in classes)
    forbidden = li.emoji_words(npm_dir) | li.icon_theme_words(CACHE / DEB_DOWNLOADS) | li.glyph_words()
    assert not any(li.name_words(name) & forbidden for name, _ in classes)
    assert counts["emoji_word"] > 0 and counts["icon_theme_word"] > 0
    names = {name for name, _ in classes}
    assert "house" not in names and "folder" not in names and "github" not in names and "menu-2" not in names
