"""``tflite-train bake``: a plain classifier from an export and a checkpoint (issue 42, item 5).

Parity: the baked file's ``classify`` scores on the standard signature runner against ``predict``'s logits
(``open_adapted``: the inference-only model with the same checkpoint), within 1e-5 of the largest logit (the
head's constant W = s P_hat is rounded once to float32, and XNNPACK sums the dot products in another order),
and the same predicted classes; on mcunet (trained layers), Lite0 with the optimizer state in the
checkpoint (not baked), the tiny fixture whose zero biases share one buffer across layers, and the int8
exports (``--quantize int8-candidates``, ``int8``): trained layers' int8 kernels dequantized into float
constants, and with a prototypes-only checkpoint their (DEQUANTIZE, CONV_2D) branches inlined as they are.
Each trained case also checks that the export's own weights are more than 1e-4 off (the test sees the
trained weights).
The file: one signature, one subgraph, no variable or control flow; its metadata names the classes, the
export's input, head, model_id and the checkpoint's sha256. Refusals: a checkpoint of another model (one
line naming the file, exit 2, no traceback); nothing written on a failure or an interrupted write. The loader refuses an export, a damaged file and a re-sealed one whose metadata lies.
"""

from __future__ import annotations

import ast
import hashlib
import json
import pathlib

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import episode_arrays, fixture_model, relative_error, run_cli
from tflite_train import contract as C
from tflite_train.runtime import AdaptConfig, TrainableModel, adapt, atomic_file
from tflite_train.runtime.adapt_job import open_adapted
from tflite_train.runtime.baked.bake_job import run_bake
from tflite_train.runtime.baked.baked_classifier import STATEFUL_OPS, BakedClassifier, BakedModelError, read_baked_metadata
from tflite_train.runtime.baked.baked_model import NORM_EPS, head_weights
from tflite_train.runtime.checkpoint.checkpoint import save_checkpoint
from tflite_train.runtime.model.flatbuffer_graph import read_graph
from tflite_train.runtime.model.integrity import seal
from tflite_train.runtime.model.metadata import metadata_spans, read_metadata, read_signature_defs

pytestmark = pytest.mark.pi

CONFIG = AdaptConfig(policy="tinytrain", memory_bytes=float(2**20), compute_fraction=0.5, iterations=4)
NAMES = ("shirt", "bag", "boot")


def _adapted(fashion, folder: pathlib.Path, name: str, config: AdaptConfig = CONFIG, include_optimizer=False):
    """(checkpoint path, query images) of a 3-way adaptation of fixture ``name``."""
    model = TrainableModel(fixture_model(name))
    xs, ys, xq, _ = episode_arrays(fashion, model.input_shape, ways=3, shots=3, queries=4, seed=5)
    result = adapt(model, xs, ys, config)
    path = folder / f"{name}.ckpt"
    save_checkpoint(path, model, result.selection, include_optimizer=include_optimizer, class_names=NAMES)
    return path, xq, result.selection


@pytest.fixture(scope="module")
def baked(fashion, tmp_path_factory):
    """(checkpoint, baked file, query images) of mcunet_adam_35 adapted with trained layers."""
    folder = tmp_path_factory.mktemp("baked")
    checkpoint, xq, selection = _adapted(fashion, folder, "mcunet_adam_35")
    assert selection.layers, "the test needs trained layers"
    out = folder / "classifier.tflite"
    run_bake(fixture_model("mcunet_adam_35"), checkpoint, out)
    return checkpoint, out, xq


@pytest.mark.parametrize("name,policy,include_optimizer", [
    ("mcunet_adam_35", "tinytrain", False), ("lite0_meta_adam_64", "tinytrain", True),
    ("tiny_adam_33", "tinytrain", False), ("tiny_int8c_33", "tinytrain", False), ("tiny_int8_33", "tinytrain", False),
    ("tiny_int8c_33", "none", False)])
def test_baked_scores_equal_predict(fashion, tmp_path, name, policy, include_optimizer):
    config = CONFIG if policy == "tinytrain" else AdaptConfig(policy=policy, iterations=0)
    checkpoint, xq, selection = _adapted(fashion, tmp_path, name, config, include_optimizer)
    assert bool(selection.layers) == (policy == "tinytrain")
    result = run_bake(fixture_model(name), checkpoint, tmp_path / "c.tflite")
    classifier = BakedClassifier(tmp_path / "c.tflite")
    assert classifier.class_names == NAMES == result.class_names and classifier.input_shape == xq.shape[1:]
    got = classifier.logits(xq)
    lean, stored = open_adapted(fixture_model(name), checkpoint)
    want = lean.infer(xq)[C.LOGITS][:, :3]
    assert got.shape == (len(xq), 3) and got.dtype == np.float32
    assert relative_error(got, want) < 1e-5
    if selection.layers:  # the trained weights matter at this tolerance: the export's own weights are far off
        untrained = TrainableModel(fixture_model(name))
        untrained.set_head(stored.arrays[C.PROTOTYPES])
        assert relative_error(untrained.infer(xq)[C.LOGITS][:, :3], want) > 1e-4
    np.testing.assert_array_equal(np.argmax(got, 1), np.argmax(want, 1))
    assert result.size_bytes == (tmp_path / "c.tflite").stat().st_size <= result.inference_part


def test_the_baked_file_is_one_signature_without_state(baked):
    _, out, xq = baked
    data = out.read_bytes()
    signatures = read_signature_defs(data)
    assert signatures == {C.CLASSIFY: {C.F_INPUTS: {C.IMAGES: ((-1, *xq.shape[1:]), "float32")},
                                       C.F_OUTPUTS: {C.LOGITS: ((-1, 3), "float32")}}}
    graph = read_graph(data)
    assert len(graph.operators) == 1 and not {op.name for op in graph.operators[0]} & STATEFUL_OPS
    interpreter = BakedClassifier(out).interpreter
    assert interpreter.get_signature_list() == {C.CLASSIFY: {"inputs": [C.IMAGES], "outputs": [C.LOGITS]}}


def test_the_metadata_says_what_was_baked(baked):
    checkpoint, out, _ = baked
    export = read_metadata(fixture_model("mcunet_adam_35"))
    assert read_baked_metadata(out.read_bytes(), str(out)) == {
        C.F_FORMAT: C.BAKED_FORMAT, C.F_FORMAT_VERSION: C.BAKED_FORMAT_VERSION, C.CK_CLASS_NAMES: list(NAMES),
        C.F_INPUT: export[C.F_INPUT], C.F_HEAD: export[C.F_HEAD], C.F_MODEL_ID: export[C.F_MODEL_ID],
        C.F_CHECKPOINT_SHA256: hashlib.sha256(checkpoint.read_bytes()).hexdigest()}


def test_the_head_is_the_cosine_head_by_hand():
    # logits_c = s <e_hat, p_c / |p_c|>: W's rows are the unit prototypes times s
    prototypes = np.array([[3.0, 4.0], [0.0, 2.0]], np.float32)
    np.testing.assert_allclose(head_weights(prototypes, 10.0), [[6.0, 8.0], [0.0, 10.0]], rtol=1e-6)
    assert np.all(head_weights(np.zeros((1, 2), np.float32), 10.0) == 0)  # an empty class: 0, no NaN
    tree = ast.parse((pathlib.Path(__file__).parents[3] / "converters" / "cosine_head.py").read_text())
    exported = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(t, "id", "") == "NORM_EPS" for t in node.targets)]
    assert exported == [NORM_EPS], "the bake's eps must be the exporter's"


def test_a_checkpoint_of_another_model_is_refused_in_one_line(baked, tmp_path, capsys):
    checkpoint, _, _ = baked
    out = tmp_path / "c.tflite"
    code = run_cli(["bake", "--model", str(fixture_model("tiny_adam_33")), "--checkpoint", str(checkpoint),
                    "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert str(checkpoint) in err and "not this model" in err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_a_failed_or_interrupted_bake_leaves_the_output_as_it_was(baked, tmp_path, monkeypatch):
    checkpoint, _, _ = baked
    out = tmp_path / "c.tflite"
    out.write_bytes(b"earlier")
    with pytest.raises(ValueError, match="not this model"):
        run_bake(fixture_model("tiny_adam_33"), checkpoint, out)
    write = atomic_file.write_atomic

    def interrupted(path, data, **kwargs):
        def stop(done, total):
            raise KeyboardInterrupt

        write(path, data, chunk_size=4096, on_chunk=stop)

    monkeypatch.setattr("tflite_train.runtime.baked.bake_job.write_atomic", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_bake(fixture_model("mcunet_adam_35"), checkpoint, out)
    assert out.read_bytes() == b"earlier" and sorted(tmp_path.iterdir()) == [out]


def test_the_output_may_not_overwrite_an_input(baked, tmp_path):
    checkpoint, _, _ = baked
    with pytest.raises(ValueError, match="would overwrite the input"):
        run_bake(fixture_model("mcunet_adam_35"), checkpoint, checkpoint)


def test_the_loader_refuses_an_export_a_damaged_file_and_lying_metadata(baked, tmp_path):
    _, out, _ = baked
    with pytest.raises(BakedModelError, match="an exported model: bake it"):
        BakedClassifier(fixture_model("mcunet_adam_35"))
    data = bytearray(out.read_bytes())
    data[len(data) // 2] ^= 1
    with pytest.raises(BakedModelError, match="checksum mismatch"):
        BakedClassifier(bytes(data))
    data = out.read_bytes()
    start, n = metadata_spans(data)[C.BAKED_METADATA_NAME]
    meta = json.loads(data[start:start + n])
    meta[C.CK_CLASS_NAMES] = meta[C.CK_CLASS_NAMES][:2]  # the graph's logits have 3 columns
    lying = seal(data[:start] + json.dumps(meta).encode().ljust(n) + data[start + n:])
    with pytest.raises(BakedModelError, match=f"signature '{C.CLASSIFY}' outputs"):
        BakedClassifier(lying)
    meta[C.CK_CLASS_NAMES], meta[C.F_FORMAT_VERSION] = list(NAMES), C.BAKED_FORMAT_VERSION + 1
    newer = seal(data[:start] + json.dumps(meta).encode().ljust(n) + data[start + n:])
    with pytest.raises(BakedModelError, match="update the runtime"):
        BakedClassifier(newer)


def test_images_of_another_shape_are_refused(baked):
    _, out, xq = baked
    with pytest.raises(ValueError, match="images must be float32"):
        BakedClassifier(out).logits(xq[:, :-1])


def test_the_help_says_what_the_file_is_and_how_to_run_it(capsys):
    assert run_cli(["bake", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: None)" not in text
    for phrase in (f"one signature, '{C.CLASSIFY}'", "get_signature_runner", "Interpreter.runSignature",
                   C.BAKED_METADATA_NAME, "written atomically", "--checkpoint"):
        assert phrase in text


def test_a_baked_file_given_as_the_model_is_refused_in_one_line(baked, tmp_path, capsys):
    checkpoint, out, _ = baked
    code = run_cli(["bake", "--model", str(out), "--checkpoint", str(checkpoint), "--out", str(tmp_path / "c.tflite")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"{out}: a baked classifier, not an export" in err
