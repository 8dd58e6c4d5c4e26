"""Reading PyTorch ``torch.save`` checkpoints into numpy arrays without torch, refusing any code.

A ``.pth`` file is a pickle, and unpickling runs whatever callables the pickle names. This reader
admits only the globals that rebuild tensors (``torch._utils._rebuild_tensor_v2`` and
``_rebuild_tensor``, ``_rebuild_parameter``), the typed storage classes (``torch.FloatStorage``, ...) and
``collections.OrderedDict``; each is mapped to a local, inert stand-in, so nothing from torch (or from
the pickle) is ever imported or called. Any other global is refused with :class:`UnsafePickleError`
naming it, before anything is constructed from it.

Two container formats are read, chosen by the file's first bytes (checked before the unpickler sees
anything):

* **legacy stream** (``torch.save(..., _use_new_zipfile_serialization=False)``, PyTorch <= 1.5 default):
  five records back to back: a pickled magic number 0x1950a86a20f9469cfc6c, the protocol version
  1001, a ``sys_info`` dict (byte order, type sizes), the pickled object whose storages are
  persistent ids ``('storage', StorageType, key, location, numel, view)``, a pickled list of the
  storage keys, then per key an int64 little-endian element count followed by the raw bytes;
* **zip** (PyTorch >= 1.6): ``<prefix>/data.pkl`` with persistent ids
  ``('storage', StorageType, key, location, numel)`` and one member ``<prefix>/data/<key>`` of raw
  bytes per storage; member names are checked against that layout before anything is read.

A tensor ``_rebuild_tensor_v2(storage, offset, size, stride, ...)`` becomes the numpy array with
element ``[i_0, ..., i_{n-1}] = storage[offset + sum_j i_j * stride_j]`` (strides in elements), copied
so that it owns its data. The old tar format (PyTorch < 0.4) is refused with a clear error.
"""

from __future__ import annotations

import _compat_pickle
import collections
import dataclasses
import io
import math
import pathlib
import pickle
import re
import struct
import zipfile
from typing import Any

import numpy as np

MAX_FILE_BYTES = 1 << 30
"""Largest checkpoint read (1 GiB); larger files are refused before being read."""

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001
# A legacy stream begins with the pickled magic number: PROTO 2, LONG1 of 10 bytes.
_LEGACY_PREFIX = b"\x80\x02\x8a\x0a" + LEGACY_MAGIC.to_bytes(10, "little")
_ZIP_PREFIX = b"PK\x03\x04"

STORAGE_DTYPES: dict[str, np.dtype] = {
    "FloatStorage": np.dtype("<f4"),
    "DoubleStorage": np.dtype("<f8"),
    "HalfStorage": np.dtype("<f2"),
    "LongStorage": np.dtype("<i8"),
    "IntStorage": np.dtype("<i4"),
    "ShortStorage": np.dtype("<i2"),
    "CharStorage": np.dtype("i1"),
    "ByteStorage": np.dtype("u1"),
    "BoolStorage": np.dtype("?"),
}
"""The torch storage classes admitted, with the numpy dtype of their elements."""


class TorchPickleError(ValueError):
    """The file is not a readable PyTorch checkpoint (format, size, layout, contents)."""


class UnsafePickleError(TorchPickleError):
    """The pickle names a global outside the tensor-rebuild allow-list; nothing from it was run."""


@dataclasses.dataclass(frozen=True)
class _StorageType:
    """Inert stand-in for ``torch.<Name>Storage``: only its element dtype matters."""

    name: str
    dtype: np.dtype


@dataclasses.dataclass(frozen=True)
class _StorageRef:
    """A storage named by a persistent id; ``view`` = (offset, numel) within the root storage or None."""

    key: str
    dtype: np.dtype
    numel: int
    view: tuple[int, int] | None = None


@dataclasses.dataclass(frozen=True)
class _TensorRef:
    """A tensor awaiting its storage's bytes (legacy streams store them after the pickle)."""

    storage: _StorageRef
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]


def _int_tuple(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise TorchPickleError(f"tensor {what} must be a tuple of ints; got {value!r}")
    return tuple(value)


def _rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any, *_ignored: Any) -> _TensorRef:
    """Stand-in for ``torch._utils._rebuild_tensor(_v2)``: records where the tensor's elements live."""
    if not isinstance(storage, _StorageRef):
        raise TorchPickleError(f"tensor storage must be a persistent storage id; got {type(storage).__name__}")
    if not isinstance(storage_offset, int) or isinstance(storage_offset, bool) or storage_offset < 0:
        raise TorchPickleError(f"tensor storage offset must be an int >= 0; got {storage_offset!r}")
    size_t, stride_t = _int_tuple(size, "size"), _int_tuple(stride, "stride")
    if len(size_t) != len(stride_t) or any(v < 0 for v in size_t + stride_t):
        raise TorchPickleError(f"tensor size {size_t} and stride {stride_t} do not match")
    return _TensorRef(storage, storage_offset, size_t, stride_t)


def _rebuild_parameter(data: Any, requires_grad: Any = None, backward_hooks: Any = None, *_ignored: Any) -> Any:
    """Stand-in for ``torch._utils._rebuild_parameter``: a parameter is its tensor."""
    if not isinstance(data, _TensorRef):
        raise TorchPickleError(f"parameter data must be a tensor; got {type(data).__name__}")
    return data


_ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    **{("torch", name): _StorageType(name, dtype) for name, dtype in STORAGE_DTYPES.items()},
}


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler whose globals are the allow-list above and whose persistent ids are storages."""

    def __init__(self, data: bytes | io.BytesIO, *, legacy: bool, source: str) -> None:
        super().__init__(data if isinstance(data, io.BytesIO) else io.BytesIO(data))
        self.legacy = legacy
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            # Protocol <= 2 pickles write Python 2 names (__builtin__.eval); name the Python 3 one too.
            py3 = _compat_pickle.NAME_MAPPING.get((module, name))
            py3 = py3 or (_compat_pickle.IMPORT_MAPPING.get(module, module), name)
            alias = "" if py3 == (module, name) else f" (pickled as {module}.{name})"
            raise UnsafePickleError(
                f"{self.source}: the pickle names the global {py3[0]}.{py3[1]}{alias}, which is not a "
                f"tensor-rebuild global; refused (nothing from the pickle was run)"
            ) from None

    def persistent_load(self, pid: Any) -> _StorageRef:
        if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage":
            raise TorchPickleError(f"{self.source}: unknown persistent id {pid!r:.80}")
        storage_type, key, numel = pid[1], pid[2], pid[4]  # pid[3]: the device location, unused
        if not isinstance(storage_type, _StorageType):
            raise TorchPickleError(f"{self.source}: persistent id names no storage type: {pid!r:.80}")
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z0-9_]{1,64}", key):
            raise TorchPickleError(f"{self.source}: bad storage key {key!r:.80}")
        if not isinstance(numel, int) or isinstance(numel, bool) or numel < 0:
            raise TorchPickleError(f"{self.source}: bad storage size {numel!r:.80}")
        view = None
        if self.legacy and len(pid) > 5 and pid[5] is not None:
            view_meta = pid[5]
            if (not isinstance(view_meta, tuple) or len(view_meta) != 3
                    or not all(isinstance(v, int) and v >= 0 for v in view_meta[1:])):
                raise TorchPickleError(f"{self.source}: bad storage view {view_meta!r:.80}")
            # The tensor reads the view (key view_meta[0]) at offset view_meta[1] of the root storage.
            view = (view_meta[1], view_meta[2])
        return _StorageRef(key, storage_type.dtype, numel, view)


def _load_restricted(stream: io.BytesIO, *, legacy: bool, source: str) -> Any:
    try:
        return _RestrictedUnpickler(stream, legacy=legacy, source=source).load()
    except TorchPickleError:
        raise
    except (pickle.UnpicklingError, EOFError, TypeError, ValueError, KeyError, IndexError,
            AttributeError, struct.error, MemoryError, RecursionError) as exc:
        raise TorchPickleError(f"{source}: corrupt pickle ({type(exc).__name__}: {exc})") from None


MAX_DEPTH = 32
"""Deepest nesting of containers accepted in a checkpoint (state dicts are 1-3 levels deep)."""


class _Budget:
    """Elements still allowed to be materialized (bounds what a small pickle can make us allocate)."""

    def __init__(self, max_bytes: int) -> None:
        self.left = max_bytes

    def take(self, nbytes: int, source: str) -> None:
        self.left -= nbytes
        if self.left < 0:
            raise TorchPickleError(f"{source}: its tensors would take more than 4x the file's size in memory; refused")


def _materialize(obj: Any, storages: dict[str, np.ndarray], source: str, budget: _Budget, depth: int = 0) -> Any:
    """Replaces every ``_TensorRef`` in ``obj`` (dicts, lists, tuples) by its numpy array."""
    if depth > MAX_DEPTH:
        raise TorchPickleError(f"{source}: containers nested deeper than {MAX_DEPTH}")
    if isinstance(obj, _TensorRef):
        root = storages.get(obj.storage.key)
        if root is None:
            raise TorchPickleError(f"{source}: tensor refers to missing storage {obj.storage.key!r}")
        data = root
        if obj.storage.view is not None:
            start, count = obj.storage.view
            if start + count > root.size:
                raise TorchPickleError(f"{source}: storage view {obj.storage.view} exceeds storage {obj.storage.key!r}")
            data = root[start:start + count]
        if data.dtype != obj.storage.dtype:
            raise TorchPickleError(f"{source}: storage {obj.storage.key!r} read with two dtypes")
        numel = math.prod(obj.size)
        if numel == 0:
            return np.zeros(obj.size, data.dtype)
        if numel > data.size:
            raise TorchPickleError(
                f"{source}: tensor of size {obj.size} has more elements than its storage ({data.size}); "
                f"expanded (stride-0) tensors are not supported"
            )
        last = obj.offset + sum((n - 1) * s for n, s in zip(obj.size, obj.stride))
        if last >= data.size:
            raise TorchPickleError(
                f"{source}: tensor of size {obj.size}, stride {obj.stride}, offset {obj.offset} reads past "
                f"its storage of {data.size} elements"
            )
        budget.take(numel * data.itemsize, source)
        view = np.lib.stride_tricks.as_strided(
            data[obj.offset:], shape=obj.size, strides=tuple(s * data.itemsize for s in obj.stride), writeable=False
        )
        return np.array(view, dtype=data.dtype.newbyteorder("="), order="C", copy=True)
    if isinstance(obj, dict):
        out = type(obj)() if isinstance(obj, collections.OrderedDict) else {}
        for key, value in obj.items():
            out[key] = _materialize(value, storages, source, budget, depth + 1)
        return out
    if isinstance(obj, (list, tuple)):
        return type(obj)(_materialize(v, storages, source, budget, depth + 1) for v in obj)
    return obj


def _collect_refs(obj: Any, out: dict[str, _StorageRef], source: str, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise TorchPickleError(f"{source}: containers nested deeper than {MAX_DEPTH}")
    if isinstance(obj, _TensorRef):
        prev = out.setdefault(obj.storage.key, obj.storage)
        if prev.dtype != obj.storage.dtype or prev.numel != obj.storage.numel:
            raise TorchPickleError(f"{source}: storage {obj.storage.key!r} is named with two types or sizes")
    elif isinstance(obj, dict):
        for value in obj.values():
            _collect_refs(value, out, source, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            _collect_refs(value, out, source, depth + 1)


def _storage_array(raw: bytes, ref: _StorageRef, source: str) -> np.ndarray:
    if len(raw) != ref.numel * ref.dtype.itemsize:
        raise TorchPickleError(
            f"{source}: storage {ref.key!r} has {len(raw)} bytes, expected {ref.numel} x {ref.dtype.itemsize}"
        )
    return np.frombuffer(raw, dtype=ref.dtype)


def _read_legacy(data: bytes, source: str) -> Any:
    stream = io.BytesIO(data)
    magic = _load_restricted(stream, legacy=True, source=source)
    if magic != LEGACY_MAGIC:
        raise TorchPickleError(f"{source}: bad magic number in legacy checkpoint")
    protocol = _load_restricted(stream, legacy=True, source=source)
    if protocol != LEGACY_PROTOCOL:
        raise TorchPickleError(f"{source}: unsupported legacy protocol version {protocol!r}")
    sys_info = _load_restricted(stream, legacy=True, source=source)
    if not isinstance(sys_info, dict) or sys_info.get("little_endian") is not True:
        raise TorchPickleError(f"{source}: only little-endian checkpoints are supported; sys_info={sys_info!r:.120}")
    obj = _load_restricted(stream, legacy=True, source=source)
    keys = _load_restricted(stream, legacy=True, source=source)
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise TorchPickleError(f"{source}: the storage key list is not a list of strings")
    refs: dict[str, _StorageRef] = {}
    _collect_refs(obj, refs, source)
    storages: dict[str, np.ndarray] = {}
    for key in keys:
        header = stream.read(8)
        if len(header) != 8:
            raise TorchPickleError(f"{source}: truncated before storage {key!r}")
        (numel,) = struct.unpack("<q", header)
        ref = refs.get(key)
        if ref is None:
            raise TorchPickleError(f"{source}: storage {key!r} is used by no tensor")
        if numel != ref.numel:
            raise TorchPickleError(f"{source}: storage {key!r} holds {numel} elements, its id says {ref.numel}")
        nbytes = numel * ref.dtype.itemsize
        raw = stream.read(nbytes)
        if len(raw) != nbytes:
            raise TorchPickleError(f"{source}: truncated inside storage {key!r}")
        storages[key] = _storage_array(raw, ref, source)
    if stream.read(1):
        raise TorchPickleError(f"{source}: unexpected bytes after the last storage")
    return _materialize(obj, storages, source, _Budget(4 * len(data)))


_ZIP_MEMBER = re.compile(r"(?:data\.pkl|version|byteorder|\.format_version|\.storage_alignment|data/[0-9]{1,12}|\.data/(?:version|serialization_id))")


def _read_zip(data: bytes, source: str) -> Any:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise TorchPickleError(f"{source}: not a valid zip checkpoint ({exc})") from None
    prefixes = {info.filename.split("/", 1)[0] for info in infos}
    if len(prefixes) != 1:
        raise TorchPickleError(f"{source}: zip checkpoint must have one top-level folder; found {sorted(prefixes)[:5]}")
    (prefix,) = prefixes
    if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,128}", prefix) or prefix in (".", ".."):
        raise TorchPickleError(f"{source}: bad zip folder name {prefix!r:.80}")
    members: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in infos:
        rest = info.filename[len(prefix) + 1:]
        if not info.filename.startswith(prefix + "/") or not _ZIP_MEMBER.fullmatch(rest):
            raise TorchPickleError(f"{source}: unexpected zip member {info.filename!r:.120}")
        if info.compress_type != zipfile.ZIP_STORED:
            raise TorchPickleError(f"{source}: zip member {info.filename!r} is compressed; torch stores members uncompressed")
        total += info.file_size
        members[rest] = info
    if "data.pkl" not in members:
        raise TorchPickleError(f"{source}: zip checkpoint has no {prefix}/data.pkl")
    if total > MAX_FILE_BYTES:
        raise TorchPickleError(f"{source}: zip members hold {total} bytes > {MAX_FILE_BYTES}")
    if "byteorder" in members and archive.read(members["byteorder"]).strip() != b"little":
        raise TorchPickleError(f"{source}: only little-endian checkpoints are supported")
    obj = _load_restricted(io.BytesIO(archive.read(members["data.pkl"])), legacy=False, source=source)
    refs: dict[str, _StorageRef] = {}
    _collect_refs(obj, refs, source)
    storages = {}
    for key, ref in refs.items():
        info = members.get(f"data/{key}")
        if info is None:
            raise TorchPickleError(f"{source}: zip checkpoint lacks storage {prefix}/data/{key}")
        storages[key] = _storage_array(archive.read(info), ref, source)
    return _materialize(obj, storages, source, _Budget(4 * len(data)))


def load_torch_pickle(path: str | pathlib.Path, *, max_bytes: int = MAX_FILE_BYTES) -> Any:
    """Reads a ``torch.save`` file (legacy stream or zip) with tensors as numpy arrays, without torch.

    Args:
      path: The ``.pth``/``.pt`` file (untrusted).
      max_bytes: Largest file accepted; checked before the file is read.

    Returns:
      The saved object (typically an ``OrderedDict`` name -> ``np.ndarray``), tensors copied into
      owned, native-byte-order numpy arrays of the storage's dtype.

    Raises:
      UnsafePickleError: the pickle names a global outside the allow-list (nothing was run).
      TorchPickleError: missing/too large file, unknown format, corrupt or inconsistent contents.
    """
    path = pathlib.Path(path)
    source = str(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TorchPickleError(f"{source}: cannot read ({exc.strerror})") from None
    if size > max_bytes:
        raise TorchPickleError(f"{source}: {size} bytes exceeds the limit of {max_bytes}")
    data = path.read_bytes()
    return load_torch_pickle_bytes(data, source=source, max_bytes=max_bytes)


def load_torch_pickle_bytes(data: bytes, *, source: str = "<bytes>", max_bytes: int = MAX_FILE_BYTES) -> Any:
    """Like :func:`load_torch_pickle` for bytes already in memory; ``source`` names them in errors."""
    if len(data) > max_bytes:
        raise TorchPickleError(f"{source}: {len(data)} bytes exceeds the limit of {max_bytes}")
    if data.startswith(_LEGACY_PREFIX):
        return _read_legacy(data, source)
    if data.startswith(_ZIP_PREFIX):
        return _read_zip(data, source)
    if len(data) > 262 and data[257:262] == b"ustar":
        raise TorchPickleError(f"{source}: a tar checkpoint (PyTorch < 0.4) is not supported; re-save it with a newer torch")
    raise TorchPickleError(f"{source}: not a PyTorch checkpoint (neither the legacy magic number nor a zip header)")
