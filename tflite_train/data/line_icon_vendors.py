"""The line_icons target's vendors: the pinned npm icon packages and where each keeps its line drawings.

``PACKAGES`` pins each vendor's npm tarball (name, version, the registry's ``dist.integrity`` that ``data
prepare`` checks before reading it, code and image licences); ``VENDORS`` says, per vendor, which member
folder holds the line (outline) style and how a file name becomes an icon name (the name rule of
``tflite_train.data.line_icons``).
"""

from __future__ import annotations

import dataclasses

from tflite_train.data.npm_packages import NpmPackage

__all__ = ["PACKAGES", "VENDORS", "ScopedNpmPackage", "Vendor"]


@dataclasses.dataclass(frozen=True)
class ScopedNpmPackage(NpmPackage):
    """An ``@scope/name`` package: ``npm pack`` writes ``scope-name-<version>.tgz``."""

    @property
    def tarball(self) -> str:
        return f"{self.name.lstrip('@').replace('/', '-')}-{self.version}.tgz"


def _package(name: str, version: str, integrity: str, code_licence: str, image_licence: str) -> NpmPackage:
    cls = ScopedNpmPackage if name.startswith("@") else NpmPackage
    return cls(name, version, integrity, code_licence, image_licence)


PACKAGES: dict[str, NpmPackage] = {
    "lucide": _package(
        "lucide-static", "1.62.0",
        "sha512-WBZA/m2PvkFpMGHDtsBck5P2A9G4ehLlYu4GwwICcmEm1BvYVgj00lCDxKRWLlbMlOibLaiwdQ88G5pHkSWgwA==",
        "ISC", "ISC (icons derived from Feather: MIT)"),
    "tabler": _package(
        "@tabler/icons", "3.52.0",
        "sha512-dldKlJNfO/gZnGLcIY0X2EFFKIMGwL/rEvTqglvBgAPFiwj9pZOCN5V3Sf0Gyjq6foX4VQmLdOmsS4w5FdWKAw==",
        "MIT", "MIT"),
    "phosphor": _package(
        "@phosphor-icons/core", "2.1.1",
        "sha512-v4ARvrip4qBCImOE5rmPUylOEK4iiED9ZyKjcvzuezqMaiRASCHKcRIuvvxL/twvLpkfnEODCOJp5dM4eZilxQ==",
        "MIT", "MIT"),
    "remixicon": _package(  # 4.9.x ships the non-standard "Remix Icon License v1.0"; 4.8.0 is Apache-2.0
        "remixicon", "4.8.0",
        "sha512-8qTM/bWkmsAWitvcL9XrVPVdqHRrdmnNp4zCFBdmIHBygxfHWwoK6NzitbiMyRzjcXKBMlS/ab5M65/ZlxJTVA==",
        "Apache-2.0", "Apache-2.0"),
    "ionicons": _package(
        "ionicons", "8.1.0",
        "sha512-XSM2gYWTXxSYTwjmKWAoy4yR7AbAFDjpc5ZIivAiGXskM0fe5CdMPfs6InQRUcrYtVb2WZ/0HQ1/jeh3JW78SA==",
        "MIT", "MIT"),
    "iconoir": _package(
        "iconoir", "7.12.1",
        "sha512-7ei4jd1bss0Ukyz/bbM9Zc96aLfZuwTEkSW8u5fx5h3X9912MsnmWwPw9LyTUtcf0ShfTzQeQ9oG7IslW3hrLg==",
        "MIT", "MIT"),
    "heroicons": _package(
        "heroicons", "2.2.0",
        "sha512-yOwvztmNiBWqR946t+JdgZmyzEmnRMC2nxvHFC90bF1SUttwB6yJKYeme1JeEcBfobdOs827nCyiWBS2z/brog==",
        "MIT", "MIT"),
    "bootstrap": _package(
        "bootstrap-icons", "1.13.2",
        "sha512-fAU1Ly3dH7hwRg+CB8EZ0Vl0fF80zgXHeUVJyfUOKzoURr+TbwISbCW5tKUoQLERaWYG2emTCybcPbD96hdD1A==",
        "MIT", "MIT"),
    "eva": _package(
        "eva-icons", "1.1.3",
        "sha512-QBSEWNbEx1H0numXP1qgxKVCZHonRaky5ft4pGzQBcO4cy7mEja6TuJ8rc7BqX2pmkvetVQWKDH+DK/8y7GTag==",
        "MIT", "MIT"),
    "octicons": _package(
        "@primer/octicons", "19.42.0",
        "sha512-MEcHxVxNHu1I2Ndk5Mcwp7tfBiDk/EpytDJgKOfE2ldqIczWucVrZNeNU4wtEN5mnNudZ0YL5G0spax3bSMT4w==",
        "MIT", "MIT"),
}
"""The pinned npm packages (``dist.integrity`` from the registry), by vendor."""


@dataclasses.dataclass(frozen=True)
class Vendor:
    """Where one vendor's line-style drawings are and how their file names become icon names.

    Attributes:
      key: Vendor (and ``PACKAGES`` key).
      folder: Member folder of the line style (``package/icons/outline/``).
      any_depth: Read the folder's sub-folders too (Remix Icon's category folders).
      suffix: Style suffix of a line drawing's stem, removed from the name ("" = none).
      plain_fallback: With a suffix: a stem with neither ``suffix`` nor a ``skip_suffixes`` ending is a
        single-style drawing, read under its plain stem.
      skip_suffixes: Stems of other styles in the same folder, not read.
      brand_prefix, brand_suffix, brand_folder: How the vendor marks a brand logo (a stem ``prefix<name>`` /
        ``<name>suffix``, or a sub-folder), for the ``brand_logo`` rule.
    """

    key: str
    folder: str
    any_depth: bool = False
    suffix: str = ""
    plain_fallback: bool = False
    skip_suffixes: tuple[str, ...] = ()
    brand_prefix: str = ""
    brand_suffix: str = ""
    brand_folder: str = ""

    def _stem(self, member: str) -> tuple[str, str] | None:
        """(sub-folder, lower-case stem) of an SVG member of the folder, None otherwise."""
        if not member.startswith(self.folder) or not member.endswith(".svg"):
            return None
        rest = member[len(self.folder):]
        sub, _, file = rest.rpartition("/")
        if sub and not self.any_depth:
            return None
        return sub, file[:-len(".svg")].lower()

    def icon_name(self, member: str) -> str | None:
        """The normalised icon name of a member (module docstring), None if it is not a line drawing of the vendor."""
        parsed = self._stem(member)
        if parsed is None:
            return None
        stem = parsed[1]
        if any(stem.endswith(s) for s in self.skip_suffixes):
            return None
        if self.suffix:
            if stem.endswith(self.suffix):
                return stem[:-len(self.suffix)] or None
            return stem if self.plain_fallback else None
        return stem

    def brand(self, member: str) -> str | None:
        """The brand name a member marks as a logo (``brand_prefix`` / ``brand_suffix`` / ``brand_folder``), else None."""
        parsed = self._stem(member)
        if parsed is None:
            return None
        sub, stem = parsed
        if self.brand_folder and sub == self.brand_folder:
            return self.icon_name(member)
        if self.brand_prefix and stem.startswith(self.brand_prefix):
            return _strip_suffix(stem[len(self.brand_prefix):], (self.suffix,))
        if self.brand_suffix and stem.endswith(self.brand_suffix):
            return stem[:-len(self.brand_suffix)]
        return None

    def drawings(self, members: list[str]) -> dict[str, str]:
        """{icon name: member} of a vendor's members; a suffixed line drawing wins over a plain stem of the same name."""
        out: dict[str, tuple[int, str]] = {}
        for member in sorted(members):
            name = self.icon_name(member)
            if name is None:
                continue
            rank = 0 if self.suffix and self._stem(member)[1].endswith(self.suffix) else 1
            if name not in out or (rank, member) < out[name]:
                out[name] = (rank, member)
        return {name: member for name, (_, member) in sorted(out.items())}


def _strip_suffix(stem: str, suffixes: tuple[str, ...]) -> str:
    for s in suffixes:
        if s and stem.endswith(s):
            return stem[:-len(s)]
    return stem


VENDORS: tuple[Vendor, ...] = (
    Vendor("lucide", "package/icons/"),
    Vendor("tabler", "package/icons/outline/", brand_prefix="brand-"),
    Vendor("phosphor", "package/assets/regular/", brand_suffix="-logo"),
    Vendor("remixicon", "package/icons/", any_depth=True, suffix="-line", plain_fallback=True, skip_suffixes=("-fill",),
           brand_folder="Logos"),
    Vendor("ionicons", "package/dist/svg/", suffix="-outline", brand_prefix="logo-"),
    Vendor("iconoir", "package/icons/regular/"),
    Vendor("heroicons", "package/24/outline/"),
    Vendor("bootstrap", "package/icons/", skip_suffixes=("-fill",)),
    Vendor("eva", "package/outline/svg/", suffix="-outline"),
    Vendor("octicons", "package/build/svg/", suffix="-24"),
)
"""The vendors read, in sample order."""
