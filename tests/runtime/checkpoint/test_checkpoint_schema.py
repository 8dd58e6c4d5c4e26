"""Issue 25: every header the runtime reads is checked field by field against a declared schema before use.

Checkpoint headers (and their selection) with a valid digest but fields of the wrong JSON type, out of
range or inconsistent with each other or with the model, and model metadata re-sealed with such fields,
are refused with the project's error type, in one line naming the field; on the command line exit 2
and one line, never a traceback. The same cases as the Java ``CheckpointHeaderTest``.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from PIL import Image

from tests.runtime.crafted_files import model, parts  # noqa: F401 (fixtures)
from tests.runtime.crafted_files import (
    CLASS_NAMES, MODEL, metadata_of, model_bytes, resealed_checkpoint, with_metadata, write,
)
from tests.runtime.runtime_fixtures import assert_one_line_error, fixture_model, run_cli
from tflite_train import contract as C
from tflite_train.runtime.adapt_job import run_prediction
from tflite_train.runtime.checkpoint.checkpoint import decode_checkpoint, restore_checkpoint
from tflite_train.runtime.checkpoint.checkpoint_schema import SELECTION, check_checkpoint_header
from tflite_train.runtime.errors import CheckpointError, UserError
from tflite_train.runtime.model.header_schema import Const, Float, Int, ListOf, SchemaError, Str, check_header
from tflite_train.runtime.model.interpreter import TrainableModel
from tflite_train.sparse.selection import Selection

pytestmark = pytest.mark.pi


def _set(path: str, value):
    """An edit setting the member at dotted ``path`` ("selection.channels") of a header or metadata to ``value``
    (a callable: of the selected layer)."""
    def edit(header, layer=None):
        *parents, last = path.split(".")
        node = header
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(last) if isinstance(node, list) else last] = value(layer) if callable(value) else value
    return edit


# edit, regex of the refusal (after "checkpoint header field " when it is a schema refusal)
HEADER_CASES = {
    "channels is a list": (_set("selection.channels", [1]), r"field selection\.channels: must be an object of name -> a list of integers; got a list"),
    "channels is null": (_set("selection.channels", None), r"field selection\.channels: .* got null"),
    "channels of a layer is an int": (_set("selection.channels", lambda l: {l: 1}), r"field selection\.channels\.\w+: must be a list"),
    "channel is a string": (_set("selection.channels", lambda l: {l: ["0", "3", "5"]}), r"selection\.channels\.\w+\[0\]: must be an integer; got a string '0'"),
    "channels unsorted": (_set("selection.channels", lambda l: {l: [3, 0, 5]}), r"must be sorted and unique"),
    "channels empty": (_set("selection.channels", lambda l: {l: []}), r"must have 1\.\.\d+ items; got 0"),
    "channels boolean": (_set("selection.channels", lambda l: {l: [True]}), r"must be an integer; got true"),
    "channels lack a layer": (_set("selection.channels", {}), r"field selection\.channels: lacks the selected layer"),
    "channels name another layer": (_set("selection.channels", lambda l: {l: [0], "zzz": [1]}), r"names layer 'zzz', which is not in layers"),
    "layers is a string": (_set("selection.layers", "abc"), r"field selection\.layers: must be a list of strings; got a string 'abc'"),
    "layers repeat": (_set("selection.layers", lambda l: [l, l]), r"must not repeat an item"),
    "selection is a list": (_set("selection", []), r"field selection: must be an object; got a list"),
    "selection version 2": (_set("selection.format_version", 2), r"field selection\.format_version: must be 1; got 2"),
    "format version 1.0": (_set("format_version", 1.0), r"field format_version: must be 1; got 1\.0"),
    "model id is a number": (_set("model_id", 7), r"field model_id: must be a string; got 7"),
    "include_optimizer is 0": (_set("include_optimizer", 0), r"field include_optimizer: must be true or false; got 0"),
    "class names are ints": (_set("class_names", [1, 2, 3]), r"field class_names\[0\]: must be a string; got 1"),
    "class names null": (_set("class_names", None), r"field class_names: must be a list"),
    "fewer class names": (_set("class_names", ["a"]), r"field class_names: names 1 classes; the head has num_classes 3"),
    "more class names": (_set("class_names", ["a", "b", "c", "d"]), r"names 4 classes; the head has num_classes 3"),
    "arrays null": (_set("arrays", None), r"field arrays: must be a list"),
    "array offset a string": (_set("arrays.0.offset", "0"), r"field arrays\[0\]\.offset: must be an integer; got a string '0'"),
    "array offset beyond payload": (_set("arrays.0.offset", 10**9), r"field arrays\[0\]\.offset: array '\w+' ends at byte"),
    "array shape negative": (_set("arrays.0.shape", [-1]), r"field arrays\[0\]\.shape\[0\]: must be in 0\.\.\d+; got -1"),
    "array shape huge": (_set("arrays.0.shape", [2**40]), r"field arrays\[0\]\.shape\[0\]: must be in"),
    "array nbytes inconsistent": (_set("arrays.0.shape", [7]), r"field arrays\[0\]\.nbytes: is 12 but shape \[7\]"),
    "array dtype float64": (_set("arrays.0.dtype", "float64"), r"field arrays\[0\]\.dtype: must be one of float32, int32"),
    "array entry extra key": (_set("arrays.0.evil", 1), r"field arrays\[0\]\.evil: is not a known field"),
    "unknown top-level field": (_set("evil", 1), r"field evil: is not a known field"),
    "payload_bytes negative": (_set("payload_bytes", -1), r"field payload_bytes: must be in 0\.\."),
    "report is a list": (_set("report", [1]), r"field report: must be an object; got a list"),
    "channel beyond the layer": (_set("selection.channels", lambda l: {l: [0, 3, 99999]}), r"has channel 99999; layer '\w+' has \d+ output channels"),
    "layer not a candidate": (lambda h, l: (_set("selection.layers", ["stem"])(h, l), _set("selection.channels", {"stem": [0]})(h, l)), r"selects layers \['stem'\] that are not candidates"),
}


@pytest.mark.parametrize("case", sorted(HEADER_CASES))
def test_crafted_header_is_refused_naming_the_field(model, parts, case):
    header, payload = copy.deepcopy(parts[0]), parts[1]
    edit, pattern = HEADER_CASES[case]
    edit(header, model.candidates[-1])
    state = {k: v.copy() for k, v in model.get_state().items()}
    with pytest.raises(CheckpointError, match=pattern) as info:
        restore_checkpoint(model, decode_checkpoint(resealed_checkpoint(header, payload), "x.ckpt"))
    assert "\n" not in str(info.value)
    assert isinstance(info.value, UserError)
    assert all(np.array_equal(state[k], v) for k, v in model.get_state().items()), "a refused checkpoint changed the state"


def test_valid_header_round_trips(model, parts):
    checkpoint = decode_checkpoint(resealed_checkpoint(*parts), "x.ckpt")
    assert checkpoint.class_names == CLASS_NAMES
    restore_checkpoint(model, checkpoint)
    assert model.num_classes == 3 or int(model.get_state()[C.NUM_CLASSES]) == 3


@pytest.mark.parametrize("raw, pattern", [
    (b"[" * 50_000 + b"]" * 50_000, "malformed checkpoint header|field header"),
    (b'{"a": NaN}', "malformed checkpoint header .*NaN is not JSON"),
    (b"\xff\xfe", "malformed checkpoint header"),
    (b'{"payload_bytes": ' + b"9" * 5000 + b"}", "malformed checkpoint header"),
    (b"7", "field header: must be an object; got 7"),
])
def test_header_that_is_not_a_json_object(raw, pattern):
    with pytest.raises(CheckpointError, match=pattern):
        decode_checkpoint(resealed_checkpoint(None, b"", raw=raw))


def test_header_with_a_duplicate_key_is_refused_in_one_line(tmp_path, capsys, parts):
    """``json.loads`` keeps the last of two equal keys, the Java core refuses the header: so does the Python reader,
    here with a forged ``model_id`` before the real one (which the last-wins reading would have accepted)."""
    header, payload = parts
    raw = ('{"%s": "forged", ' % C.F_MODEL_ID + json.dumps(header)[1:]).encode()
    ckpt = write(tmp_path / "dup.ckpt", resealed_checkpoint(None, payload, raw=raw))
    expected = f"dup.ckpt: malformed checkpoint header (StrictJsonError: duplicate key '{C.F_MODEL_ID}')"
    with pytest.raises(CheckpointError) as info:
        decode_checkpoint(ckpt.read_bytes(), str(ckpt))
    assert str(info.value) == f"{tmp_path}/{expected}"
    capsys.readouterr()
    assert run_cli(["show", str(ckpt)]) == 2
    assert_one_line_error(capsys.readouterr().err, expected)


@pytest.mark.parametrize("case", ["channels is a list", "channels is null", "fewer class names"])
def test_predict_refuses_in_one_line(tmp_path, capsys, model, parts, case):
    """The issue's cases: AttributeError / IndexError tracebacks in ``predict`` before; now exit 2, one line."""
    header, payload = copy.deepcopy(parts[0]), parts[1]
    HEADER_CASES[case][0](header, model.candidates[-1])
    ckpt = write(tmp_path / "bad.ckpt", resealed_checkpoint(header, payload))
    image = tmp_path / "x.png"
    Image.fromarray(np.full((8, 8, 3), 127, np.uint8)).save(image)
    capsys.readouterr()
    code = run_cli(["predict", "--model", str(fixture_model(MODEL)), "--checkpoint", str(ckpt), str(image)])
    assert code == 2
    assert_one_line_error(capsys.readouterr().err, "bad.ckpt: checkpoint header field ")
    with pytest.raises(CheckpointError, match=r"checkpoint header field (selection\.channels|class_names)"):
        run_prediction(fixture_model(MODEL), ckpt, [image])


@pytest.mark.parametrize("data, pattern", [
    ({"format": C.SELECTION_FORMAT, "format_version": 1, "policy": "p", "layers": ["a"], "channels": ["a"]},
     r"field selection\.channels: must be an object"),
    ({"format": C.SELECTION_FORMAT, "format_version": 1, "policy": "p", "layers": ["a"], "channels": None},
     r"field selection\.channels: .*got null"),
    ({"format": C.SELECTION_FORMAT, "format_version": 1, "policy": None, "layers": [], "channels": {}},
     r"field selection\.policy: must be a string; got null"),
    ({"format": C.SELECTION_FORMAT, "format_version": 1, "policy": "p", "layers": ["a"], "channels": {"a": [-1]}},
     r"field selection\.channels\.a\[0\]: must be in 0\.\."),
    ([], r"field selection: must be an object; got a list"),
])
def test_selection_from_dict_checks_the_schema(data, pattern):
    with pytest.raises(SchemaError, match=pattern):
        Selection.from_dict(data)


def test_selection_round_trips_through_the_schema():
    selection = Selection(("a", "b"), {"a": (0, 2), "b": (1,)}, "tinytrain")
    assert Selection.from_json(selection.to_json()) == selection
    assert check_header(SELECTION, selection.to_dict(), "selection")[C.SEL_CHANNELS] == {"a": [0, 2], "b": [1]}


@pytest.mark.parametrize("schema, value, pattern", [
    (Int(0, 5), True, "must be an integer; got true"),
    (Int(0, 5), 5.0, "must be an integer; got 5.0"),
    (Int(0, 5), 6, r"must be in 0\.\.5; got 6"),
    (Float(0, 1), float("nan"), "must be finite"),
    (Float(0, 1), 10**400, "must be finite"),
    (Float(0, 1, low_open=True), 0, r"must be in \(0, 1\]"),
    (Const(1), True, "must be 1; got true"),
    (Str(max_length=3), "abcd", r"must have 0\.\.3 characters; got 4"),
    (ListOf(Int(0, 9), 2), [1, 2, 3], r"must have 0\.\.2 items; got 3"),
])
def test_schema_nodes(schema, value, pattern):
    with pytest.raises(SchemaError, match=pattern) as info:
        check_header(schema, value, "f")
    assert info.value.field.startswith("f")


def test_check_checkpoint_header_names_the_first_bad_field(parts):
    header = copy.deepcopy(parts[0])
    header["selection"]["channels"] = None
    with pytest.raises(CheckpointError, match=r"^y\.ckpt: checkpoint header field selection\.channels: "):
        check_checkpoint_header(header, "y.ckpt")


METADATA_CASES = {
    "input height a string": (_set("input.height", "33"), r"field input\.height: must be an integer; got a string '33'"),
    "input std zero": (_set("input.std", [0.0, 1.0, 1.0]), r"field input\.std: must be > 0"),
    "input mean too short": (_set("input.mean", [0.0]), r"field input\.mean: has 1 values for channels 3"),
    "input range reversed": (_set("input.range", [1.0, 0.0]), r"field input\.range: must be \[low, high\] with low < high"),
    "input range a number": (_set("input.range", 1), r"field input\.range: must be a list"),
    "capacity negative": (_set("class_capacity", -1), r"field class_capacity: must be in 1\.\."),
    "feature dim a float": (_set("feature_dim", 32.0), r"field feature_dim: must be an integer; got 32\.0"),
    "layers null": (_set("layers", None), r"field layers: must be a list"),
    "layer out_channels a string": (_set("layers.3.out_channels", "x"), r"field layers\[3\]\.out_channels: must be an integer"),
    "layer index out of order": (_set("layers.2.index", 5), r"field layers\[2\]\.index: is 5; indices must be 0\.\.n-1"),
    "layer groups not dividing": (_set("layers.3.groups", 3), r"field layers\[3\]\.groups: 3 must divide"),
    "candidates not in layers": (_set("candidates", ["nope"]), r"field candidates\[0\]: names 'nope', which is not in layers"),
    "candidates empty": (_set("candidates", []), r"field candidates: must have 1\.\."),
    "signatures a list": (_set("signatures", []), r"field signatures: must be an object"),
    # a NaN is not strict JSON (refused when parsed, tests/contract/test_contract_strict_json.py); a number beyond float is
    "head scale beyond float": (lambda m: m["head"].__setitem__("scale", 10**400), r"field head\.scale: must be finite"),
    "optimizer unknown": (_set("optimizer.name", "rmsprop"), r"field optimizer\.name: must be one of adam, sgd_momentum"),
    "cached cut index beyond": (_set("cached_cuts.0.lowest_index", 9999), r"field cached_cuts\[0\]\.lowest_index: is 9999"),
    "model id empty": (_set("model_id", ""), r"field model_id: must have 1\.\."),
}


@pytest.mark.parametrize("case", sorted(METADATA_CASES))
def test_resealed_metadata_is_refused_naming_the_field(tmp_path, capsys, no_interpreter, case):
    data = model_bytes()
    meta = metadata_of(data)
    edit, pattern = METADATA_CASES[case]
    edit(meta)
    path = write(tmp_path / "m.tflite", with_metadata(data, meta))
    with pytest.raises(C.ContractError, match=r"m\.tflite: metadata " + pattern) as info:
        TrainableModel(path)
    assert "\n" not in str(info.value)
    capsys.readouterr()
    assert run_cli(["verify", str(path)]) == 2
    assert_one_line_error(capsys.readouterr().err, "m.tflite: metadata field ")


def test_every_fixture_model_passes_the_metadata_schema():
    from tflite_train.runtime.model.metadata import read_metadata
    from tflite_train.runtime.model.model_metadata_schema import check_model_metadata

    for name in ("tiny_adam_33", "tiny_sgd_full_17", "tiny_nocache_17", "mcunet_adam_35", "byo_plain_cnn_23",
                 "byo_rescaling_20"):
        assert check_model_metadata(read_metadata(fixture_model(name)), name)[C.F_MODEL_ID]


@pytest.mark.parametrize("edit, pattern", [
    (lambda r: r.clear(), "run report field classes: is missing"),
    (lambda r: r.update(classes=None), "run report field classes: must be a list"),
    (lambda r: r.update(selection=5), "run report field selection: must be an object"),
    (lambda r: r.update(losses="ab"), "run report field losses: must be a list"),
    (lambda r: r.update(seconds={"load": "x"}), "run report field seconds.load: must be a number"),
    (lambda r: r.__setitem__("cache", {"used": True}), "run report field cache.layer: is missing"),
    (lambda r: r.__setitem__("updates", {"batch": 1, "prototype_mode": "fixed"}),
     "run report field updates.mode: is missing"),
    (lambda r: r.__setitem__("rate_choice", {"rate": "fast", "reason": "x"}),
     "run report field rate_choice.rate: must be a number"),
    (lambda r: r.__setitem__("replay_memory", {"examples": 0, "bytes": 0, "budget": 0, "rows": -1, "reason": "x"}),
     "run report field replay_memory.rows: must be in 0.."),
])
def test_show_refuses_a_crafted_report(earlier_run, tmp_path, capsys, parts, edit, pattern):
    """``show`` prints the stored report: a crafted one ended in KeyError/TypeError; now one line."""
    from tflite_train.runtime.checkpoint.checkpoint import load_checkpoint

    header = copy.deepcopy(parts[0])
    header["report"] = dict(load_checkpoint(earlier_run[1] / "m.ckpt").report)
    edit(header["report"])
    ckpt = write(tmp_path / "r.ckpt", resealed_checkpoint(header, parts[1]))
    capsys.readouterr()
    assert run_cli(["show", str(ckpt)]) == 2
    assert_one_line_error(capsys.readouterr().err, "r.ckpt: " + pattern)


def test_show_prints_a_real_report(earlier_run, capsys):
    _, run = earlier_run
    capsys.readouterr()
    assert run_cli(["show", str(run / "m.ckpt")]) == 0
    assert "adapted " in capsys.readouterr().out
