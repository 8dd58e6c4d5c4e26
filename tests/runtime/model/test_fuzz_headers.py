"""Issue 25, property-based: generated checkpoint headers and model metadata never crash the runtime.

Headers are generated from a valid one: well-typed (every value replaced by another of its JSON type),
ill-typed (any value replaced by arbitrary JSON, keys dropped or added), inconsistent (class names,
selections and array shapes that disagree with each other or the model), and raw header bytes. They
go through the public API (``decode_checkpoint`` + ``restore_checkpoint``, ``TrainableModel`` and what
``adapt`` derives from the metadata) and the command line (``predict``). The property: a result, or
the project's own error type (exit 2 with one line) — never another exception, never a signal.
Example counts: ``fuzz_profiles`` (seeded in CI; ``HYPOTHESIS_PROFILE=long`` by hand).
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.runtime.crafted_files import model, parts, replay_parts  # noqa: F401 (fixtures)
from tests.runtime.crafted_files import MODEL, metadata_of, model_bytes, resealed_checkpoint, with_metadata
from tests.runtime.fuzz_profiles import PROJECT_ERRORS, examples
from tests.runtime.runtime_fixtures import fixture_model, run_cli
from tflite_train import contract as C
from tflite_train.runtime.adapt_job import checkpoint_bound_bytes
from tflite_train.runtime.checkpoint.checkpoint import decode_checkpoint, restore_checkpoint
from tflite_train.runtime.model.interpreter import TrainableModel
from tflite_train.runtime.model.model_contract import check_metadata, input_range, layer_table
from tflite_train.sparse.budget import scaled_memory_budget

pytestmark = pytest.mark.pi

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
"""Any strict-JSON value (json.dumps writes no NaN or Infinity from it)."""
EDGE_INTS = st.sampled_from([0, 1, -1, 2, 3, 31, 32, 33, 2**31 - 1, 2**31, 2**32, 2**63, -2**63, 10**20])


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys / indices) of ``node``, parents before children."""
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, prefix + (i,))
    return out


def _get(node: Any, path: tuple) -> Any:
    for key in path:
        node = node[key]
    return node


def _replace(root: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    root = copy.deepcopy(root)
    _get(root, path[:-1])[path[-1]] = value
    return root


def _same_type(value: Any) -> st.SearchStrategy:
    """Another value of ``value``'s JSON type (a "well-typed" mutation)."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(-3, 2**16) | EDGE_INTS | st.integers()
    if isinstance(value, float):
        return st.floats(allow_nan=False, allow_infinity=False)
    if isinstance(value, str):
        return st.text(max_size=20) | st.sampled_from([value + "x", value[:-1], "", value.upper()])
    if isinstance(value, list):
        if value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return st.lists(st.integers(-2, 64) | EDGE_INTS, max_size=8)
        if value and all(isinstance(v, str) for v in value):
            return st.lists(st.sampled_from(value) | st.text(max_size=8), max_size=len(value) + 2)
        return st.lists(JSON, max_size=3) | st.just(value[:-1]) | st.just(value + value[-1:])
    if isinstance(value, dict):
        keys = list(value)
        return st.dictionaries(st.sampled_from(keys) | st.text(max_size=6), JSON, max_size=4) if keys else st.just({})
    return JSON


@st.composite
def well_typed(draw, header: dict) -> dict:
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(header)[1:]))
        header = _replace(header, path, draw(_same_type(_get(header, path))))
    return header


@st.composite
def ill_typed(draw, header: dict) -> Any:
    path = draw(st.sampled_from(_paths(header)))
    action = draw(st.sampled_from(["replace", "drop", "add"]))
    target = _get(header, path)
    if action == "drop" and path:
        parent = copy.deepcopy(_get(header, path[:-1]))
        del parent[path[-1]]
        return _replace(header, path[:-1], parent)
    if action == "add" and isinstance(target, (dict, list)):
        target = copy.deepcopy(target)
        if isinstance(target, dict):
            target[draw(st.text(max_size=8))] = draw(JSON)
        else:
            target.append(draw(JSON))
        return _replace(header, path, target)
    return _replace(header, path, draw(JSON))


@st.composite
def inconsistent(draw, header: dict, candidates: dict[str, int]) -> dict:
    header = copy.deepcopy(header)
    layers = draw(st.lists(st.sampled_from(sorted(candidates)) | st.text(min_size=1, max_size=6), max_size=3,
                           unique=True))
    header["selection"]["layers"] = layers
    header["selection"]["channels"] = {
        name: sorted(draw(st.sets(st.integers(0, candidates.get(name, 8) + 2), min_size=1, max_size=6)))
        for name in layers}
    header["class_names"] = draw(st.lists(st.text(max_size=6), max_size=5))
    if draw(st.booleans()):
        entry = draw(st.sampled_from(header["arrays"]))
        entry["shape"] = draw(st.lists(st.integers(0, 40), max_size=4))
        entry["nbytes"] = 4 * math.prod(entry["shape"])
    if draw(st.booleans()):
        header["include_optimizer"] = not header["include_optimizer"]
    return header


def _api_property(model, data: bytes) -> None:
    """decode + restore: a checkpoint, or a project error; a refused checkpoint leaves the state as it was."""
    before = {k: v.copy() for k, v in model.get_state().items()}
    try:
        checkpoint = restore_checkpoint(model, decode_checkpoint(data, "fuzz.ckpt"))
    except PROJECT_ERRORS as err:
        assert "\n" not in str(err), str(err)
        after = model.get_state()
        assert all(np.array_equal(before[k], after[k], equal_nan=True) for k in before)
        return
    assert len(checkpoint.class_names) in (0, int(model.get_state()[C.NUM_CLASSES]))
    model.reset_state()


@examples(150)
@given(data=st.data())
def test_fuzz_checkpoint_header_well_typed(model, parts, data):
    header = data.draw(well_typed(parts[0]))
    _api_property(model, resealed_checkpoint(header, parts[1]))


@examples(150)
@given(data=st.data())
def test_fuzz_checkpoint_header_ill_typed(model, parts, data):
    header = data.draw(ill_typed(parts[0]))
    _api_property(model, resealed_checkpoint(header, parts[1]))


@examples(100)
@given(data=st.data())
def test_fuzz_checkpoint_header_inconsistent(model, parts, data):
    header = data.draw(inconsistent(parts[0], model.candidate_channels))
    _api_property(model, resealed_checkpoint(header, parts[1]))


def _replay_paths(header: dict) -> list[tuple]:
    """The paths of the replay section and of its two array entries (the replay parser's input)."""
    entries = [i for i, e in enumerate(header["arrays"]) if e["name"] in (C.REPLAY_ACTIVATIONS, C.REPLAY_LABELS)]
    return [p for p in _paths(header) if p[:1] == (C.CK_REPLAY,) or (p[:1] == ("arrays",) and p[1:2]
                                                                      and p[1] in entries)]


@st.composite
def replay_mutation(draw, header: dict) -> Any:
    """The header with 1-3 well- or ill-typed changes inside its replay section or replay array entries."""
    paths = _replay_paths(header)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        try:
            target = _get(header, path)
        except (KeyError, IndexError, TypeError):  # an earlier change removed or replaced its parent
            continue
        if draw(st.booleans()):
            header = _replace(header, path, draw(_same_type(target)))
        elif draw(st.booleans()) and len(path) > 1:
            parent = copy.deepcopy(_get(header, path[:-1]))
            del parent[path[-1]]
            header = _replace(header, path[:-1], parent)
        else:
            header = _replace(header, path, draw(JSON))
    return header


@examples(200)
@given(data=st.data())
def test_fuzz_replay_section(model, replay_parts, data):
    """The replay parser (``checkpoint_schema.REPLAY`` and its rules) on generated sections: a checkpoint whose
    memory fits, or one line; the payload may also hold other labels and values."""
    header, payload = replay_parts
    header = data.draw(replay_mutation(header))
    if data.draw(st.booleans()):  # rewrite the labels' or the activations' bytes in place
        name = data.draw(st.sampled_from([C.REPLAY_LABELS, C.REPLAY_ACTIVATIONS]))
        entry = next(e for e in replay_parts[0]["arrays"] if e["name"] == name)
        raw = data.draw(st.binary(min_size=entry["nbytes"], max_size=entry["nbytes"]))
        payload = payload[:entry["offset"]] + raw + payload[entry["offset"] + entry["nbytes"]:]
    _api_property(model, resealed_checkpoint(header, payload))


@examples(50)
@given(rows=st.integers(1, 6), classes=st.integers(1, 3), seed=st.integers(0, 2**16), spare=st.integers(0, 64),
       special=st.sampled_from([0.0, -0.0, 1e-45, 3.4e38, -3.4e38]))
def test_fuzz_replay_round_trip(model, rows, classes, seed, spare, special):
    """Any valid memory survives encode/decode bit for bit (float bit patterns, subnormals and -0.0 included)."""
    from tflite_train.runtime.checkpoint.checkpoint import encode_checkpoint
    from tflite_train.runtime.adaptation.replay_memory import ReplayMemory

    rng = np.random.default_rng(seed)
    cut = model.cached_cuts[seed % len(model.cached_cuts)]
    values = rng.normal(size=(rows, *cut.shape)).astype(np.float32)
    values.reshape(-1)[seed % values.size] = special
    memory = ReplayMemory(cut.layer, cut.index, cut.shape, rows * cut.bytes_per_image + spare, values,
                          rng.integers(0, classes, rows).astype(np.int32))
    plain = decode_checkpoint(resealed_checkpoint(*parts_of(model)))
    names = tuple(f"c{k}" for k in range(3))
    data = encode_checkpoint(plain.model_id, plain.selection, plain.arrays, False, names, replay=memory)
    back = decode_checkpoint(data).replay
    assert back.activations.tobytes() == values.tobytes() and back.labels.tobytes() == memory.labels.tobytes()
    assert back.section() == memory.section()


def parts_of(model):
    from tests.runtime.crafted_files import adapted_checkpoint, split_checkpoint

    return split_checkpoint(adapted_checkpoint(model))


@examples(100)
@given(raw=st.binary(max_size=300) | JSON.map(lambda v: json.dumps(v).encode()), payload=st.binary(max_size=64))
def test_fuzz_checkpoint_raw_header_bytes(model, raw, payload):
    _api_property(model, resealed_checkpoint(None, payload, raw=raw))


@examples(100)
@given(data=st.data())
def test_fuzz_checkpoint_file_bytes(model, parts, data):
    """Bytes of a whole file flipped, cut or spliced (the digest refuses almost all: the seal's own property)."""
    valid = bytearray(resealed_checkpoint(*parts))
    for _ in range(data.draw(st.integers(0, 3))):
        valid[data.draw(st.integers(0, len(valid) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(valid)))
    _api_property(model, bytes(valid[:cut]))


@examples(20)
@given(data=st.data())
def test_fuzz_predict_cli_with_generated_headers(model, parts, data, tmp_path_factory, capsys):
    kind = data.draw(st.sampled_from(["well", "ill", "inconsistent"]))
    header = data.draw({"well": well_typed(parts[0]), "ill": ill_typed(parts[0]),
                        "inconsistent": inconsistent(parts[0], model.candidate_channels)}[kind])
    folder = tmp_path_factory.mktemp("predict")
    ckpt = folder / "c.ckpt"
    ckpt.write_bytes(resealed_checkpoint(header, parts[1]))
    image = folder / "x.npy"
    np.save(image, np.full((9, 9, 3), 100, np.uint8))
    capsys.readouterr()
    code = run_cli(["predict", "--model", str(fixture_model(MODEL)), "--checkpoint", str(ckpt), str(image), "--quiet"])
    err = capsys.readouterr().err
    assert code in (0, 2), (code, err)
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("tflite-train predict: error: "), err
    else:
        assert err == ""


def _use_metadata(model: TrainableModel) -> None:
    """What ``adapt`` derives from the metadata before it trains."""
    check_metadata(model.metadata)
    table = layer_table(model.metadata)
    input_range(model.metadata)
    checkpoint_bound_bytes(model, include_optimizer=True)
    scaled_memory_budget(table)
    model.reset_state()


@pytest.fixture(scope="module")
def metadata():
    meta = metadata_of(model_bytes())
    return {k: v for k, v in meta.items() if k != C.F_CONFIG}


def _metadata_property(tmp_path_factory, meta: Any) -> None:
    try:
        data = with_metadata(model_bytes(), meta)
    except ValueError:
        assume(False)  # longer than the entry: cannot be written in place
        return
    path = tmp_path_factory.mktemp("meta") / "m.tflite"
    path.write_bytes(data)
    try:
        model = TrainableModel(path)
        _use_metadata(model)
    except PROJECT_ERRORS as err:
        assert "\n" not in str(err), str(err)


@examples(100)
@given(data=st.data())
def test_fuzz_model_metadata_well_typed(metadata, tmp_path_factory, data):
    _metadata_property(tmp_path_factory, data.draw(well_typed(metadata)))


@examples(100)
@given(data=st.data())
def test_fuzz_model_metadata_ill_typed(metadata, tmp_path_factory, data):
    _metadata_property(tmp_path_factory, data.draw(ill_typed(metadata)))


@pytest.fixture(scope="module")
def real_report(tmp_path_factory, fashion):
    """The report of a real ``adapt`` run (3 steps on the tiny model)."""
    from tests.runtime.runtime_fixtures import adapt_cli, write_episode_folders

    from tflite_train.runtime.checkpoint.checkpoint import load_checkpoint

    root = tmp_path_factory.mktemp("report")
    support, _ = write_episode_folders(fashion, root, ways=2, shots=2, queries=1)
    assert adapt_cli(support, root / "m.ckpt") == 0
    return load_checkpoint(root / "m.ckpt").report


@examples(60)
@given(data=st.data())
def test_fuzz_show_with_generated_reports(parts, real_report, data, tmp_path_factory, capsys):
    report = data.draw(well_typed(real_report) | ill_typed(real_report))
    header = copy.deepcopy(parts[0])
    header["report"] = report
    path = tmp_path_factory.mktemp("show") / "r.ckpt"
    path.write_bytes(resealed_checkpoint(header, parts[1]))
    capsys.readouterr()
    code = run_cli(["show", str(path)])
    err = capsys.readouterr().err
    assert code in (0, 2), (code, err)
    assert code == 0 or (err.count("\n") == 1 and err.startswith("tflite-train show: error: ")), err
