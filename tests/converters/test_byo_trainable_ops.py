"""SeparableConv2D, Concatenate, grouped Conv2D, LayerNormalization and GELU train on device: a small
Xception-style, DenseNet-style, ResNeXt-style and ConvNeXt-style CNN (32 px, random weights, BatchNorm
not calibrated) export with no flags, their candidates include the separable layers (both halves), the
grouped convs and the layers below the LayerNormalizations and their gradient region the
concatenations, LayerNormalizations and GELUs, the file holds builtin ops only, and ``verify`` passes
(LiteRT in process; tflite-runtime 2.14 in the Pi env when present).

Exports are slow (30-55 s each on 2 busy cores): each model once (module-scoped), without the optional
signatures (``train_variants=0``, ``cache_signatures=False``: they do not change the self-test).

On LiteRT, ``verify`` runs the first three on the CompiledModel with XNNPACK's weight cache and the ConvNeXt-style
one, whose output shapes depend on tensor values, on the Interpreter (``static_shapes``; on the CompiledModel
it crashed the process).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from tflite_train.converters import ExportConfig, write_export
from tflite_train.converters.candidate_choice import AUTO
from tflite_train.converters.graph.region import gradient_region
from tflite_train.runtime import TrainableModel, read_metadata
from tflite_train.runtime.model.compiled_signatures import CompiledSignatures, compiled_model_available
from tflite_train.runtime.model.flatbuffer_graph import read_graph
from tflite_train.runtime.model.metadata import read_operator_codes
from tflite_train.runtime.model.selftest import verify
from tflite_train.runtime.model.static_shapes import value_shaped_operators

from tests.converters.byo_models import convnext_cnn, dense_cnn, grouped_cnn, separable_cnn
from tests.converters.test_selftest_zoo import PI_PYTHON, REPO

NO_FLAGS = dict(backbone="keras", input_size=None, candidates=AUTO, train_variants=0, cache_signatures=False)
MODELS = {"separable_cnn": separable_cnn, "dense_cnn": dense_cnn, "grouped_cnn": grouped_cnn,
          "convnext_cnn": convnext_cnn}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """name -> (path, ExportResult) of the no-flags export, made once per model."""
    cache: dict[str, tuple[pathlib.Path, object]] = {}

    def export(name: str):
        if name not in cache:
            out = tmp_path_factory.mktemp(name) / "m.tflite"
            cache[name] = out, write_export(ExportConfig(**NO_FLAGS), out, MODELS[name]())
        return cache[name]

    return export


def test_separable_layers_are_candidates(exported):
    path, result = exported("separable_cnn")
    candidates = read_metadata(path)["candidates"]
    for layer in ("s0_sep1", "s0_sep2", "head_sep"):  # both halves of every separable layer
        assert {layer, f"{layer}_depthwise"} <= set(candidates), candidates
    graph = result.module.graph
    assert graph.by_name["head_sep_depthwise"].keras_class == "SeparableConv2D"
    assert graph.by_name["head_sep"].attrs["activation"] == "relu"  # fused into the pointwise half


def test_concatenations_lie_in_the_gradient_region(exported):
    path, result = exported("dense_cnn")
    candidates = read_metadata(path)["candidates"]
    graph = result.module.graph
    region = gradient_region(graph, candidates)
    concats = {n.name for n in graph.nodes if n.op == "concat"}
    assert {"b0_l1_concat", "b1_l0_concat"} <= concats & region
    assert "b1_l0_conv2" in candidates  # its output reaches the embedding only through a concatenation


def test_grouped_convs_are_candidates(exported):
    path, result = exported("grouped_cnn")
    candidates = read_metadata(path)["candidates"]
    assert {"b0_grouped", "b1_grouped"} <= set(candidates), candidates
    node = result.module.graph.by_name["b1_grouped"]
    assert (node.op, node.attrs["groups"], node.attrs["activation"]) == ("grouped_conv2d", 4, "relu")
    assert result.module.table["b1_grouped"].groups == 4  # the cost model counts k^2 (C_in / 4) C_out


def test_layer_norm_and_gelu_lie_in_the_gradient_region(exported):
    path, result = exported("convnext_cnn")
    candidates = read_metadata(path)["candidates"]
    graph = result.module.graph
    region = gradient_region(graph, candidates)
    assert {"b0_dw", "b1_dw", "b1_pw1"} <= set(candidates), candidates  # below a LayerNormalization / a GELU
    assert {"b0_ln", "b1_ln", "b0_gelu", "b1_gelu"} <= region
    assert graph.by_name["b1_gelu"].attrs["fn"] == "gelu" and graph.by_name["b1_pw1"].attrs["activation"] == "linear"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_builtin_ops_only_and_verify_passes_on_litert(exported, name):
    path, _ = exported(name)
    codes = read_operator_codes(path)
    assert not [c.name for c in codes if c.is_custom]
    if name == "dense_cnn":
        assert {"CONCATENATION", "SPLIT_V"} <= {c.name for c in codes}  # forward concat, backward split
    if name == "convnext_cnn":
        assert "GELU" in {c.name for c in codes}
    result = verify(path)
    assert result.passed, result.format()


FORCED_ON_THE_CACHE = """
import sys
import numpy as np
from tflite_train.runtime.model.compiled_signatures import CompiledSignatures, OutputShapeError
compiled = CompiledSignatures(open(sys.argv[1], "rb").read())
runner = compiled.get_signature_runner("infer")
print(runner(images=np.zeros((1, 32, 32, 3), np.float32))["logits"].shape)
try:
    runner(images=np.zeros((3, 32, 32, 3), np.float32))
except OutputShapeError:
    print("refused")
"""
"""Runs the ConvNeXt-style model's ``infer`` on the CompiledModel at batch 1, then 3 (once a SIGSEGV)."""


@pytest.mark.skipif(not compiled_model_available(), reason="needs ai-edge-litert's CompiledModel API")
@pytest.mark.parametrize("name", sorted(MODELS))
def test_only_models_with_static_shapes_use_the_weight_cache(exported, name):
    """The ConvNeXt-style model's Dense layers on 4-D activations reshape to concat(shape(x)[:3], [units]) (and
    its LayerNormalization gradients broadcast to shape(x)): output shapes known only at run time, which LiteRT's
    CompiledModel cannot size its output buffers for (``static_shapes``). It runs on the Interpreter; forced onto
    the CompiledModel, a resized ``infer`` is refused, not run (in a subprocess: a regression would crash it)."""
    path, _ = exported(name)
    value_shaped = value_shaped_operators(read_graph(path.read_bytes()))
    model = TrainableModel(path, runtime="ai_edge_litert.interpreter")
    assert isinstance(model.interpreter, CompiledSignatures) == (name != "convnext_cnn")
    assert bool(value_shaped) == (name == "convnext_cnn"), value_shaped
    if name == "convnext_cnn":
        assert {"RESHAPE (subgraph 0)", "BROADCAST_TO (subgraph 0)"} <= set(value_shaped)
        proc = subprocess.run([sys.executable, "-c", FORCED_ON_THE_CACHE, str(path)], cwd=REPO, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0 and proc.stdout.split() == ["(1,", "64)", "refused"], proc.stdout + proc.stderr


@pytest.mark.parametrize("name", sorted(MODELS))
def test_verify_passes_on_tflite_runtime(exported, name):
    if not PI_PYTHON.exists():
        pytest.skip(f"no Pi env at {PI_PYTHON}")
    path, _ = exported(name)
    proc = subprocess.run([str(PI_PYTHON), "-m", "tflite_train.cli", "verify", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert "tflite_runtime" in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == 0 and "PASSED" in proc.stdout, proc.stdout + proc.stderr
