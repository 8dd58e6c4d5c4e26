"""Your own model trains with no flags (issue 40): small Keras models of the kinds users bring (``byo_kinds``)
export with no flags, verify, adapt under ``adapt``'s default budgets -- training at least one layer, inside
the budget -- and predict, on tflite-runtime 2.14 in the Pi env (subprocesses, as a user runs the CLI there);
the embedding is the right layer for every pooling kind and head shape; a model with two outputs is refused
in one line naming them and the flag that picks one.

Exports are module-scoped and without the optional signatures (``train_variants=0``, ``cache_signatures=False``:
they change neither what ``adapt`` can select nor its budget), but for the grayscale model, exported by the
CLI with no flags at all. About 4 s per model and 4 s per device run on 2 cores.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from tests.converters.byo_kinds import HEADS, KINDS, two_outputs
from tflite_train.cli import main
from tflite_train.converters import ExportConfig, GraphReadError
from tflite_train.converters.build_module import prepare_model
from tflite_train.converters.candidate_choice import AUTO
from tflite_train.runtime import load_checkpoint, read_metadata
from tflite_train.runtime.model.model_contract import layer_table
from tflite_train.sparse import Budget, default_budget

from tests.converters.test_selftest_zoo import NO_FLAGS, PI_PYTHON, REPO, export_with_no_flags

from tests.runtime.runtime_fixtures import load_fashion, write_episode_folders

CLI_EXPORTED = {"grayscale": []}
"""Kinds saved as ``.keras`` and exported by ``tflite-train export`` with these flags (none) besides --out."""


@pytest.mark.parametrize("name", sorted(HEADS))
def test_the_embedding_is_the_pooling_or_the_input_of_the_dense_head(name):
    """Per pooling kind (average, max; keepdims or not) and head shape (one Dense, a Dense chain with dropout and
    softmax, MobileNetV3's 1x1 convs on the kept map, none, Flatten, a Reshape): the embedding is the expected
    layer, recorded with its rule, and nothing of the classifier above it is exported."""
    build, expected = HEADS[name]
    model = build()
    prepared = prepare_model(model, ExportConfig(**NO_FLAGS))
    graph = prepared.graph
    assert graph.feature_layer.name == expected
    rule = {"pool": "global max pooling" if name.startswith("max") else "global average pooling",
            "flatten": "Flatten", "vector": "the input of the classifier's Dense layers"}[expected]
    assert graph.feature_layer.rule == rule
    width = model.get_layer(expected).output.shape[-1] if expected == "pool" else \
        int(np.prod(model.get_layer(expected).output.shape[1:]))
    assert graph.by_name[graph.output].shape == (width,)
    head = {"cls", "hidden", "head_conv", "logits"}
    assert not head & {n.name for n in graph.nodes}, "the classifier was kept"
    assert not head & {layer.name for layer in prepared.table}


def test_feature_layer_overrides_the_choice():
    prepared = prepare_model(KINDS["max_pooled"](), ExportConfig(**NO_FLAGS, feature_layer="conv1_relu"))
    assert (prepared.graph.feature_layer.name, prepared.graph.feature_layer.rule) == ("conv1_relu", "--feature-layer")
    assert prepared.graph.by_name[prepared.graph.output].op == "global_pool"  # a map gets a global average pooling


def test_augmentation_and_preprocessing_layers_at_the_input_become_the_input_spec():
    """RandomFlip/RandomRotation (identities at inference) before Rescaling and Normalization: all four leave the
    graph, the device feeds 0..255 pixels normalised in-graph."""
    graph = prepare_model(KINDS["preprocessing"](), ExportConfig(**NO_FLAGS)).graph
    assert graph.input_spec.source == "rescale+norm" and graph.input_spec.value_range == (0.0, 255.0)
    assert not {"flip", "rotate", "rescale", "norm"} & {n.name for n in graph.nodes}
    assert [n.op for n in graph.nodes if n.op in ("opaque", "identity", "affine")] == []


def test_two_outputs_are_refused_in_one_line_naming_them_and_the_flag(tmp_path, capsys):
    path = tmp_path / "two.keras"
    two_outputs().save(path)
    out = tmp_path / "out" / "m.tflite"
    assert main(["export", "--keras-model", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tflite-train export: error: model 'two_outputs' has 2 outputs (logits, aux); give --model-output "
                   "logits (or another of them) to export the path to that output, its classifier dropped, or "
                   "--feature-layer LAYER"]
    assert not out.parent.exists()
    assert main(["export", "--keras-model", str(path), "--out", str(out), "--model-output", "nope"]) == 2
    assert "--model-output 'nope' is not an output of model 'two_outputs'; its outputs: logits, aux" in \
        capsys.readouterr().err
    for fields in ({"model_output": "aux"}, {"feature_layer": "gap"}):  # the flag proposed works, as does a layer
        prepared = prepare_model(two_outputs(), ExportConfig(**NO_FLAGS, **fields))
        assert prepared.graph.feature_layer.name == "gap" and prepared.candidates
        assert not {"logits", "aux"} & {n.name for n in prepared.graph.nodes}
    with pytest.raises(GraphReadError, match="has 2 outputs"):
        prepare_model(two_outputs(), ExportConfig(**NO_FLAGS))


def test_a_refusal_is_one_line_without_tensorflow_start_up_noise(tmp_path):
    """A fresh process, as a user runs it: TensorFlow's import writes absl's and oneDNN's lines to the terminal
    whatever TF_CPP_MIN_LOG_LEVEL says; the CLI keeps them out of the refusal."""
    path = tmp_path / "two.keras"
    two_outputs().save(path)
    proc = subprocess.run([sys.executable, "-m", "tflite_train.cli", "export", "--keras-model", str(path), "--out",
                           str(tmp_path / "m.tflite")], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("tflite-train export: error: model 'two_outputs' "
                                                                    "has 2 outputs"), proc.stderr


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """kind -> path of its no-flags export, made once."""
    cache: dict[str, pathlib.Path] = {}

    def export(name: str) -> pathlib.Path:
        if name not in cache:
            cache[name] = export_with_no_flags(KINDS[name], tmp_path_factory.mktemp(name) / "m.tflite",
                                               CLI_EXPORTED.get(name))
        return cache[name]

    return export


def _coloured(root: pathlib.Path) -> None:
    """Every image under ``root`` rewritten as a tinted RGB PNG (the grey model must convert colour images)."""
    for path in sorted(root.rglob("*.png")):
        grey = np.asarray(Image.open(path).convert("L"), np.float32)
        rgb = np.stack([grey, 0.6 * grey + 40, 255 - grey], axis=-1).clip(0, 255).astype(np.uint8)
        Image.fromarray(rgb, "RGB").save(path)


@pytest.fixture(scope="module")
def episode(tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    """(support, query) folders: 3 classes x 2 shots, 2 queries each, of real Fashion-MNIST images in colour."""
    root = tmp_path_factory.mktemp("data")
    support, query = write_episode_folders(load_fashion(), root, ways=3, shots=2, queries=2, seed=3)
    _coloured(root)
    return support, query


def _pi(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(PI_PYTHON), "-m", "tflite_train.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_kind_exports_with_no_flags_and_trains_a_layer_under_the_default_budget_on_tflite_runtime(
        exported, episode, name, tmp_path):
    """verify, adapt with the default budgets (a few steps) and predict in the Pi env: at least one candidate
    layer is selected, its cost within the default budget, which is ``sparse.default_budget`` of the model."""
    if not PI_PYTHON.exists():
        pytest.skip(f"no Pi env at {PI_PYTHON} (make {REPO / '.venv-pi'}/.installed)")
    path = exported(name)
    meta = read_metadata(path)
    assert meta["feature_layer"]["name"] == ("flatten" if name == "sequential" else "gmp" if name == "max_pooled"
                                             else "gap")
    proc = _pi("verify", str(path))
    assert proc.returncode == 0 and "PASSED" in proc.stdout and "tflite_runtime" in proc.stdout, proc.stdout + proc.stderr

    support, query = episode
    out = tmp_path / "m.ckpt"
    proc = _pi("adapt", "--model", str(path), "--support", str(support), "--query", str(query), "--out", str(out),
               "--iterations", "3", "--quiet")
    assert proc.returncode == 0 and proc.stderr == "", proc.stdout + proc.stderr
    assert "tflite_runtime" in proc.stdout
    assert ("28x28 grey: colour images are converted" in proc.stdout) == (name == "grayscale"), proc.stdout
    checkpoint = load_checkpoint(out)
    report = checkpoint.report
    assert report["selection"]["layers"], "nothing trained under the default budget"
    assert set(report["selection"]["layers"]) <= set(meta["candidates"])
    config = checkpoint.config["adapt"]
    budget = Budget(config["memory_bytes"], config["compute_macs"], config["compute_fraction"])
    assert budget == default_budget(layer_table(meta), meta["candidates"], compute_fraction=0.15, channel_ratio=0.25,
                                    optimizer=meta["optimizer"]["name"])
    assert report["memory_bytes"] <= budget.memory_bytes and report["backward_macs"] <= report["compute_limit_macs"]
    assert len(report["losses"]) == 3 and all(np.isfinite(report["losses"]))

    images = sorted(str(p) for p in query.rglob("*.png"))
    proc = _pi("predict", "--model", str(path), "--checkpoint", str(out), "--json", "--quiet", *images)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [row["file"] for row in rows] == images
    assert {row["class"] for row in rows} <= set(checkpoint.class_names)
