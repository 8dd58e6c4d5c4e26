"""The contract module: its tables are the ones in CONTRACT.md, its version rule, its names."""

from __future__ import annotations

import dataclasses
import pathlib
import subprocess
import sys

import pytest

from tflite_train import contract as C
from tflite_train.runtime.adaptation import protocol

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_contract_md_holds_the_tables_rendered_from_the_module():
    text = (ROOT / "CONTRACT.md").read_text(encoding="utf-8")
    for table in C.markdown_tables().split("\n\n"):
        assert table.strip() in text, "CONTRACT.md is stale: paste tflite_train.contract.markdown_tables()"


def test_every_signature_takes_an_input():
    io = C.signature_io(["a", "b"], C.state_names(["a", "b"], "adam"), [C.train_variant_name("b")])
    assert set(io) == {*C.SIGNATURE_NAMES, "train_step_b"}
    for name, spec in io.items():
        assert spec["inputs"], name
    assert io["get_state"]["inputs"] == ["dummy"] and io["reset_state"]["inputs"] == ["dummy"]
    assert io["fisher"]["outputs"] == ["a", "b"]
    assert io["set_state"]["inputs"] == io["get_state"]["outputs"] == C.state_names(["a", "b"], "adam")


def test_state_names_order():
    assert C.state_names(["x"], "sgd_momentum") == ["x_kernel", "x_bias", "x_kernel_mom", "x_bias_mom", "x_mask",
                                                    "prototypes", "num_classes", "step", "learning_rate"]
    assert C.layer_state("x", "adam") == ["x_kernel", "x_bias", "x_kernel_m", "x_kernel_v", "x_bias_m", "x_bias_v",
                                          "x_mask"]
    with pytest.raises(C.ContractError, match="optimizer"):
        C.state_names(["x"], "rmsprop")


def test_version_rule():
    C.check_format({"format": "tflite-train", "format_version": 1})
    with pytest.raises(C.ContractError, match="'format_version' is 2, newer .* update the runtime"):
        C.check_format({"format": "tflite-train", "format_version": 2})
    with pytest.raises(C.ContractError, match="'format_version' is 0.*re-export"):
        C.check_format({"format": "tflite-train", "format_version": 0})
    with pytest.raises(C.ContractError, match="'format' is 'other'"):
        C.check_format({"format": "other", "format_version": 1})
    with pytest.raises(C.ContractError, match="JSON object"):
        C.check_format([])


def test_required_fields_are_documented_top_level_fields():
    assert set(C.REQUIRED_FIELDS) <= {f.path for f in C.METADATA_FIELDS}
    assert all("." not in f for f in C.REQUIRED_FIELDS)


def _graph(meta: dict) -> dict:
    """A graph that matches ``meta`` (one candidate "c" of 4 channels, Adam)."""
    k, d, h = meta["class_capacity"], meta["feature_dim"], meta["input"]["height"]
    images = ((-1, h, h, 3), "float32")
    labels = ((-1,), "int32")
    state = {n: ((4,), "float32") for n in C.state_names(["c"], "adam")}
    train = {"inputs": {"images": images, "labels": labels}, "outputs": {"loss": ((), "float32"),
                                                                        "accuracy": ((), "float32")}}
    return {
        "infer": {"inputs": {"images": images}, "outputs": {"embeddings": ((-1, d), "float32"),
                                                            "logits": ((-1, k), "float32")}},
        "fisher": {"inputs": {"images": images, "labels": labels}, "outputs": {"c": ((4,), "float32")}},
        "train_step": train,
        "set_head": {"inputs": {"prototypes": ((k, d), "float32"), "num_classes": ((), "int32")},
                     "outputs": {"ok": ((), "int32")}},
        "set_selection": {"inputs": {"channel_mask": ((4,), "float32")}, "outputs": {"ok": ((), "int32")}},
        "set_hparams": {"inputs": {"learning_rate": ((), "float32")}, "outputs": {"ok": ((), "int32")}},
        "get_state": {"inputs": {"dummy": ((), "int32")}, "outputs": state},
        "set_state": {"inputs": state, "outputs": {"ok": ((), "int32")}},
        "reset_state": {"inputs": {"dummy": ((), "int32")}, "outputs": {"ok": ((), "int32")}},
    }


def _meta() -> dict:
    state = C.state_names(["c"], "adam")
    return {"format": "tflite-train", "format_version": 1, "backbone": "x", "model_id": "0" * 64,
            "input": {"height": 8, "width": 8, "channels": 3, "dtype": "float32"}, "feature_dim": 5,
            "class_capacity": 3, "head": {}, "optimizer": {"name": "adam"},
            "layers": [{"name": "c", "index": 0, "out_channels": 4}], "candidates": ["c"], "state": state,
            "signatures": C.signature_io(["c"], state)}


def test_validate_graph_by_hand():
    C.validate_graph(_meta(), _graph(_meta()))
    graph = _graph(_meta())
    graph["get_state"]["inputs"] = {}
    meta = _meta()
    meta["signatures"]["get_state"]["inputs"] = []
    with pytest.raises(C.ContractError, match="'get_state' takes no input"):
        C.validate_graph(meta, graph)
    graph = _graph(_meta())
    graph["train_step"]["inputs"]["labels"] = ((-1,), "int64")
    with pytest.raises(C.ContractError, match=r"signatures.train_step.inputs.labels = 'int32 of rank 1"):
        C.validate_graph(_meta(), graph)
    graph = _graph(_meta())
    graph["fisher"]["outputs"]["c"] = ((6,), "float32")
    with pytest.raises(C.ContractError, match=r"layers\['c'\].out_channels = 4 but the graph has \(6,\)"):
        C.validate_graph(_meta(), graph)
    meta = _meta()
    meta["layers"] = "not a list"
    with pytest.raises(C.ContractError, match="malformed"):
        C.validate_graph(meta, _graph(_meta()))


def test_java_contract_is_generated_from_the_module():
    path = ROOT / C.JAVA_CONTRACT_PATH
    assert path.read_text(encoding="utf-8") == C.java_source(), (
        f"{C.JAVA_CONTRACT_PATH} is stale: python -m tflite_train.contract --java > {C.JAVA_CONTRACT_PATH}")


def test_java_source_spells_every_constant(monkeypatch):
    source = C.java_source()
    for name in ("SET_HEAD", "F_CLASS_CAPACITY", "CHECKSUM_NAME", "CK_PAYLOAD_BYTES", "FORMAT_VERSION"):
        assert f" {name} = " in source
    assert 'public static final String DUMMY = "dummy";' in source
    assert "public static final int FORMAT_VERSION = 1;" in source
    # a changed name in the Python module changes the generated class (the drift test above can fail)
    monkeypatch.setattr(C.signatures, "DUMMY", "trigger")
    assert 'public static final String DUMMY = "trigger";' in C.java_source()


def test_java_source_holds_the_default_protocol(monkeypatch):
    p = protocol.DEFAULT_PROTOCOL
    source = C.java_source()
    assert f"public static final int PROTOCOL_EPOCHS = {p.epochs};" in source
    assert f"public static final int PROTOCOL_BATCH_SIZE = {p.batch_size};" in source
    assert f"public static final double PROTOCOL_COMPUTE_FRACTION = {p.compute_fraction!r};" in source
    rate = "Double.NaN" if p.learning_rate is None else repr(float(p.learning_rate))
    assert f"public static final double PROTOCOL_LEARNING_RATE = {rate};" in source
    # read from the protocol at each rendering: a changed protocol changes the class (the drift test can fail)
    monkeypatch.setattr(protocol, "DEFAULT_PROTOCOL", dataclasses.replace(
        p, epochs=7, batch_size=3, compute_fraction=0.5, learning_rate=0.01))
    source = C.java_source()
    for line in ("int PROTOCOL_EPOCHS = 7;", "int PROTOCOL_BATCH_SIZE = 3;", "double PROTOCOL_COMPUTE_FRACTION = 0.5;",
                 "double PROTOCOL_LEARNING_RATE = 0.01;"):
        assert f"public static final {line}" in source
    monkeypatch.setattr(protocol, "DEFAULT_PROTOCOL", dataclasses.replace(p, epochs=40.0))
    with pytest.raises(TypeError, match=r"DEFAULT_PROTOCOL.epochs must be an int .*PROTOCOL_EPOCHS; got 40.0"):
        C.java_source()


def test_importing_the_contract_imports_no_runtime():
    code = ("import sys, tflite_train.contract; "
            "print(sorted(m for m in ('numpy', 'tflite_train.runtime') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]", f"importing tflite_train.contract imported {out.strip()} (it must stay stdlib-only)"


def _cached(meta: dict, graph: dict, shape=(2, 2, 7)) -> tuple[dict, dict]:
    """``meta``/``graph`` with one cached cut at layer "c" (activation ``shape``)."""
    meta["signatures"] = C.signature_io(["c"], meta["state"], cached_cuts=["c"])
    meta["cached_cuts"] = [{"lowest_layer": "c", "lowest_index": 0, "shape": list(shape),
                            "features_signature": "features_c", "train_signature": "train_step_from_c",
                            "infer_signature": "infer_from_c", "suffix_forward_macs": 10}]
    acts = ((-1, *shape), "float32")
    graph["features_c"] = {"inputs": {"images": graph["infer"]["inputs"]["images"]}, "outputs": {"activations": acts}}
    graph["train_step_from_c"] = {"inputs": {"activations": acts, "labels": ((-1,), "int32")},
                                  "outputs": dict(graph["train_step"]["outputs"])}
    graph["infer_from_c"] = {"inputs": {"activations": acts}, "outputs": dict(graph["infer"]["outputs"])}
    return meta, graph


def test_validate_cached_cuts_by_hand():
    C.validate_graph(*_cached(_meta(), _graph(_meta())))
    meta, graph = _cached(_meta(), _graph(_meta()))
    graph["train_step_from_c"]["inputs"]["activations"] = ((-1, 2, 2, 8), "float32")
    with pytest.raises(C.ContractError, match=r"cached_cuts\['c'\].shape = \[2, 2, 7\] but the graph has \[2, 2, 8\]"):
        C.validate_graph(meta, graph)
    meta, graph = _cached(_meta(), _graph(_meta()))
    meta["cached_cuts"][0]["lowest_index"] = 3
    with pytest.raises(C.ContractError, match="layer 'c' at index 3 is not in 'layers'"):
        C.validate_graph(meta, graph)
    meta, graph = _cached(_meta(), _graph(_meta()))
    meta["cached_cuts"][0]["train_signature"] = "train_step"
    with pytest.raises(C.ContractError, match=r"cached_cuts\['c'\].train_signature is 'train_step'"):
        C.validate_graph(meta, graph)
    meta, graph = _cached(_meta(), _graph(_meta()))
    del graph["infer_from_c"]
    with pytest.raises(C.ContractError, match="signatures.infer_from_c"):
        C.validate_graph(meta, graph)
    meta, graph = _cached(_meta(), _graph(_meta()))
    meta["cached_cuts"][0]["shape"] = [0, 2, 7]
    with pytest.raises(C.ContractError, match="must be positive sizes"):
        C.validate_graph(meta, graph)


def _episode(meta: dict, graph: dict) -> tuple[dict, dict]:
    """``_cached`` plus the optional episode and accumulation signatures of cut "c" and ``apply_accumulated``."""
    meta, graph = _cached(meta, graph)
    meta["signatures"] = C.signature_io(["c"], meta["state"], cached_cuts=["c"], episode_cuts=["c"])
    meta["cached_cuts"][0].update(episode_signature="episode_step_from_c", accumulate_signature="accumulate_from_c")
    meta["apply_accumulated_signature"] = "apply_accumulated"
    step = graph["train_step_from_c"]
    graph["episode_step_from_c"] = {"inputs": {**step["inputs"], "support_mask": ((-1,), "float32")},
                                    "outputs": dict(step["outputs"])}
    graph["accumulate_from_c"] = {"inputs": dict(step["inputs"]), "outputs": dict(step["outputs"])}
    graph["apply_accumulated"] = dict(graph["reset_state"])
    return meta, graph


def test_validate_episode_and_accumulation_signatures_by_hand():
    C.validate_graph(*_episode(_meta(), _graph(_meta())))
    C.validate_graph(*_cached(_meta(), _graph(_meta())))  # optional: a cut without them stays valid
    meta, graph = _episode(_meta(), _graph(_meta()))
    del graph["episode_step_from_c"]
    with pytest.raises(C.ContractError, match="signatures.episode_step_from_c = 'present' but the graph has 'no such"):
        C.validate_graph(meta, graph)
    meta, graph = _episode(_meta(), _graph(_meta()))
    del graph["apply_accumulated"]
    with pytest.raises(C.ContractError, match="signatures.apply_accumulated = 'present'"):
        C.validate_graph(meta, graph)
    meta, graph = _episode(_meta(), _graph(_meta()))
    del meta["apply_accumulated_signature"]
    with pytest.raises(C.ContractError, match=r"cached_cuts\['c'\] has an accumulate_signature but .* lacks "
                                              "'apply_accumulated_signature'"):
        C.validate_graph(meta, graph)
    meta, graph = _episode(_meta(), _graph(_meta()))
    meta["cached_cuts"][0]["accumulate_signature"] = "train_step_from_c"
    with pytest.raises(C.ContractError, match=r"accumulate_signature is 'train_step_from_c'; expected 'accumulate_from_c'"):
        C.validate_graph(meta, graph)
    meta, graph = _episode(_meta(), _graph(_meta()))
    graph["episode_step_from_c"]["inputs"]["support_mask"] = ((-1,), "int32")
    with pytest.raises(C.ContractError, match="episode_step_from_c.inputs.support_mask = 'float32' but the graph has 'int32'"):
        C.validate_graph(meta, graph)
    meta, graph = _episode(_meta(), _graph(_meta()))
    graph["accumulate_from_c"]["inputs"]["activations"] = ((-1, 2, 2, 8), "float32")
    with pytest.raises(C.ContractError, match=r"cached_cuts\['c'\].shape = \[2, 2, 7\] but the graph has \[2, 2, 8\]"):
        C.validate_graph(meta, graph)
