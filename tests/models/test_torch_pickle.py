"""The torch-free, restricted reader of ``torch.save`` files (legacy stream and zip).

Checkpoints are written here without torch: a stand-in ``torch`` module (only in ``sys.modules``
while pickling, removed after) gives the pickler the global names that torch itself would write.
"""

import collections
import io
import os
import pickle
import struct
import sys
import types
import zipfile

import numpy as np
import pytest

from tflite_train.models.torch_pickle import (
    LEGACY_MAGIC,
    TorchPickleError,
    UnsafePickleError,
    load_torch_pickle,
    load_torch_pickle_bytes,
)

DTYPE_STORAGE = {np.dtype("float32"): "FloatStorage", np.dtype("int64"): "LongStorage", np.dtype("float16"): "HalfStorage"}


class _Tensor:
    """A tensor to pickle: storage key, its flat data, offset, size, stride (elements)."""

    def __init__(self, key, flat, offset, size, stride):
        self.key, self.flat, self.offset, self.size, self.stride = key, flat, offset, size, stride

    def __reduce__(self):
        rebuild = sys.modules["torch._utils"]._rebuild_tensor_v2
        return rebuild, (_Storage(self.key, self.flat), self.offset, self.size, self.stride, False, collections.OrderedDict())


class _Storage:
    def __init__(self, key, flat):
        self.key, self.flat = key, flat


def _tensor(array, key):
    array = np.array(array, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    return _Tensor(key, array.reshape(-1), 0, array.shape, tuple(s // array.itemsize for s in array.strides))


@pytest.fixture
def fake_torch(monkeypatch):
    """Module objects named like torch's, so that pickle writes the same GLOBAL opcodes torch writes."""
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*args):  # never called: only its name is pickled
        raise AssertionError("stand-in called")

    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    torch._utils = utils
    for name in set(DTYPE_STORAGE.values()):
        cls = type(name, (), {"__module__": "torch"})
        setattr(torch, name, cls)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch._utils", utils)
    return torch


class _Pickler(pickle.Pickler):
    def __init__(self, file, legacy, storages):
        super().__init__(file, protocol=2)
        self.legacy, self.storages = legacy, storages

    def persistent_id(self, obj):
        if not isinstance(obj, _Storage):
            return None
        self.storages.setdefault(obj.key, obj.flat)
        storage_type = getattr(sys.modules["torch"], DTYPE_STORAGE[obj.flat.dtype])
        pid = ("storage", storage_type, obj.key, "cpu", obj.flat.size)
        return pid + (None,) if self.legacy else pid


def _legacy_bytes(obj):
    out = io.BytesIO()
    for record in (LEGACY_MAGIC, 1001, {"protocol_version": 1001, "little_endian": True,
                                       "type_sizes": {"short": 2, "int": 4, "long": 4}}):
        pickle.dump(record, out, protocol=2)
    storages = {}
    _Pickler(out, True, storages).dump(obj)
    pickle.dump(list(storages), out, protocol=2)
    for flat in storages.values():
        out.write(struct.pack("<q", flat.size) + flat.astype(flat.dtype.newbyteorder("<")).tobytes())
    return out.getvalue()


def _zip_bytes(obj, extra_members=()):
    data = io.BytesIO()
    storages = {}
    _Pickler(data, False, storages).dump(obj)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", data.getvalue())
        z.writestr("archive/byteorder", "little")
        for key, flat in storages.items():
            z.writestr(f"archive/data/{key}", flat.tobytes())
        z.writestr("archive/version", "3\n")
        for name, payload in extra_members:
            z.writestr(name, payload)
    return out.getvalue()


def _state(rng):
    conv = rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    big = rng.normal(size=(6, 5)).astype(np.float32)
    return collections.OrderedDict([
        ("conv.weight", _tensor(conv, "0")),
        # a transposed view (non-contiguous strides) with an offset into a shared storage
        ("fc.weight", _Tensor("1", big.reshape(-1), 5, (4, 5), (1, 5))),
        ("fc.bias", _Tensor("1", big.reshape(-1), 2, (3,), (1,))),
        ("bn.num_batches_tracked", _tensor(np.array(7, np.int64), "2")),
        ("half", _tensor(np.arange(6, dtype=np.float16).reshape(2, 3), "3")),
    ]), conv, big


@pytest.mark.parametrize("writer", [_legacy_bytes, _zip_bytes])
def test_reads_tensors_with_offsets_strides_and_dtypes(fake_torch, writer, tmp_path):
    state, conv, big = _state(np.random.default_rng(0))
    path = tmp_path / "m.pth"
    path.write_bytes(writer(state))
    sys.modules.pop("torch"), sys.modules.pop("torch._utils")  # the reader must not need them
    out = load_torch_pickle(path)
    assert "torch" not in sys.modules
    assert list(out) == list(state)
    np.testing.assert_array_equal(out["conv.weight"], conv)
    flat = big.reshape(-1)
    np.testing.assert_array_equal(out["fc.weight"], np.lib.stride_tricks.as_strided(flat[5:], (4, 5), (4, 20)))
    np.testing.assert_array_equal(out["fc.bias"], flat[2:5])
    assert out["bn.num_batches_tracked"].dtype == np.int64 and out["bn.num_batches_tracked"].shape == ()
    assert int(out["bn.num_batches_tracked"]) == 7
    np.testing.assert_array_equal(out["half"], np.arange(6, dtype=np.float16).reshape(2, 3))
    assert out["fc.weight"].flags.owndata and out["fc.weight"].flags.c_contiguous


class _RunsCode:
    """What an attacker pickles: unpickling it would call ``func(*args)``."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


@pytest.mark.parametrize("writer", [_legacy_bytes, _zip_bytes])
@pytest.mark.parametrize("payload", ["os.system", "builtins.eval", "builtins.exec", "subprocess.call", "torch.load",
                                     "builtins.getattr"])
def test_a_pickle_naming_another_global_is_refused_and_nothing_runs(fake_torch, writer, payload, tmp_path):
    marker = tmp_path / "pwned"
    command = f"touch {marker}"
    code = f"open({str(marker)!r}, 'w').close()"
    fake_torch.load = lambda *a: marker.write_text("x")
    fake_torch.load.__module__, fake_torch.load.__qualname__ = "torch", "load"
    evil = {
        "os.system": _RunsCode(os.system, command),
        "builtins.eval": _RunsCode(eval, code),
        "builtins.exec": _RunsCode(exec, code),
        "subprocess.call": _RunsCode(__import__("subprocess").call, ["touch", str(marker)]),
        "torch.load": _RunsCode(fake_torch.load, "x"),
        "builtins.getattr": _RunsCode(getattr, _RunsCode(__import__, "os"), "system"),
    }[payload]
    state, _, _ = _state(np.random.default_rng(1))
    state["weight"] = evil  # hidden among real tensors
    data = writer(state)
    module, name = payload.rsplit(".", 1)
    module = {"os": os.system.__module__}.get(module, module)  # os.system pickles as posix.system
    with pytest.raises(UnsafePickleError, match=rf"global {module}\.{name}[ ,]"):
        load_torch_pickle_bytes(data, source="evil.pth")
    assert not marker.exists()


def test_refusal_message_names_the_global_and_file(fake_torch):
    data = _legacy_bytes(_RunsCode(os.system, "true"))
    with pytest.raises(UnsafePickleError) as info:
        load_torch_pickle_bytes(data, source="weights/evil.pth")
    message = str(info.value)
    assert "weights/evil.pth" in message and f"{os.system.__module__}.system" in message and "\n" not in message


def test_unknown_format_and_size_limits_are_checked_before_unpickling(tmp_path):
    plain = pickle.dumps(_RunsCode(os.system, "true"), protocol=2)  # a bare pickle: not a torch checkpoint
    with pytest.raises(TorchPickleError, match="not a PyTorch checkpoint"):
        load_torch_pickle_bytes(plain)
    big = tmp_path / "big.pth"
    big.write_bytes(b"\0" * 2048)
    with pytest.raises(TorchPickleError, match="exceeds the limit"):
        load_torch_pickle(big, max_bytes=1024)
    with pytest.raises(TorchPickleError, match="cannot read"):
        load_torch_pickle(tmp_path / "missing.pth")
    tar = bytearray(600)
    tar[257:262] = b"ustar"
    with pytest.raises(TorchPickleError, match="tar checkpoint"):
        load_torch_pickle_bytes(bytes(tar))


def test_zip_member_names_are_checked(fake_torch):
    state, _, _ = _state(np.random.default_rng(2))
    for name in ("archive/../etc/passwd", "archive/code/__torch__.py", "other/data.pkl"):
        with pytest.raises(TorchPickleError, match="zip"):
            load_torch_pickle_bytes(_zip_bytes(state, [(name, b"x")]))


def test_truncated_and_inconsistent_files_are_refused(fake_torch):
    state, _, _ = _state(np.random.default_rng(3))
    data = _legacy_bytes(state)
    with pytest.raises(TorchPickleError, match="truncated"):
        load_torch_pickle_bytes(data[:-3])
    with pytest.raises(TorchPickleError, match="after the last storage"):
        load_torch_pickle_bytes(data + b"\0")
    bad = collections.OrderedDict(w=_Tensor("0", np.zeros(4, np.float32), 2, (2, 2), (2, 1)))  # reads past storage
    with pytest.raises(TorchPickleError, match="past"):
        load_torch_pickle_bytes(_legacy_bytes(bad))


def test_amplification_is_refused(fake_torch):
    flat = np.zeros(1000, np.float32)
    expanded = collections.OrderedDict(w=_Tensor("0", flat, 0, (10**6, 10**6), (0, 0)))  # 4 TB from 4 KB
    with pytest.raises(TorchPickleError, match="more elements than its storage"):
        load_torch_pickle_bytes(_legacy_bytes(expanded))
    shared = _Tensor("0", flat, 0, (1000,), (1,))
    many = collections.OrderedDict((f"w{i}", shared) for i in range(100))  # one storage, 100 copies
    with pytest.raises(TorchPickleError, match="more than 4x the file's size"):
        load_torch_pickle_bytes(_legacy_bytes(many))
    deep = [_tensor(np.ones(2, np.float32), "0")]
    for _ in range(100):
        deep = [deep]
    with pytest.raises(TorchPickleError, match="nested deeper"):
        load_torch_pickle_bytes(_zip_bytes(deep))
