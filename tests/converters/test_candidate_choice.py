"""Default candidates of a bring-your-own export (``converters.candidate_choice``): without ``--candidates``
the exporter picks blocks where the model has them, else trailing layers, shrinks past layers without a
gradient, keeps a candidate that adapt's default budget can train, records the choice, or refuses in one line.

Exports are slow: each model is exported once (module-scoped), the smallest sizes, and without the
optional signatures (``train_variants=0``, ``cache_signatures=False``) except the CLI run.
"""

from __future__ import annotations

import json
import logging

import keras
import pytest

from tflite_train.cli import main
from tflite_train.converters import ExportConfig, RegionError, write_export
from tflite_train.converters.build_module import prepare_model
from tflite_train.converters.candidate_choice import AUTO, MAX_AUTO_LAYERS
from tflite_train.runtime.model.model_contract import layer_table
from tflite_train.sparse.budget import default_budget as sparse_default_budget, scaled_memory_budget
from tflite_train.sparse.cost_model import backward_cost, channel_count
from tests.converters.blocked_models import norm_on_top

FAST = dict(backbone="keras", input_size=None, class_capacity=2, train_variants=0, cache_signatures=False,
            selftest_batch=1)


def sequential_cnn(size: int = 32, widths: tuple[int, ...] = (8, 16, 32, 64)) -> keras.Model:
    """Conv/BN/ReLU/MaxPool per width, Flatten, Dense classifier (no blocks)."""
    keras.utils.set_random_seed(0)
    stack: list = [keras.Input((size, size, 3))]
    for k, width in enumerate(widths):
        stack += [keras.layers.Conv2D(width, 3, padding="same", name=f"conv{k}"),
                  keras.layers.BatchNormalization(name=f"bn{k}"), keras.layers.ReLU(name=f"relu{k}"),
                  keras.layers.MaxPooling2D(name=f"pool{k}")]
    return keras.Sequential([*stack, keras.layers.Flatten(name="flatten"), keras.layers.Dense(10, name="cls")])


def one_block_net(size: int = 32) -> keras.Model:
    """Stem, one block (depthwise, linear 1x1 projection), a 3x3 stride-2 head conv."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((size, size, 3))
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu", name="stem")(x)
    x = keras.layers.DepthwiseConv2D(3, strides=2, padding="same", activation="relu", name="dw")(x)
    x = keras.layers.Conv2D(16, 1, name="project")(x)
    x = keras.layers.Conv2D(128, 3, strides=2, padding="same", activation="relu", name="head")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inputs, keras.layers.Dense(3, name="cls")(x))


def norm_in_the_middle(with_blocks: bool) -> keras.Model:
    """A GroupNormalization below the last two layers; with blocks: inside the first of two blocks."""
    x = inputs = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu", name="a")(x)
    if with_blocks:
        x = keras.layers.DepthwiseConv2D(3, padding="same", activation="relu", name="b1_dw")(x)
    x = keras.layers.GroupNormalization(groups=2, name="ln")(x)
    if with_blocks:
        x = keras.layers.Conv2D(16, 1, name="b1_project")(x)
        x = keras.layers.DepthwiseConv2D(3, padding="same", activation="relu", name="b2_dw")(x)
        x = keras.layers.Conv2D(32, 1, name="b2_project")(x)
    x = keras.layers.Conv2D(64, 3, strides=2, padding="same", activation="relu", name="c")(x)
    x = keras.layers.Conv2D(256, 1, activation="relu", name="d")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inputs, keras.layers.Dense(3, name="cls")(x))


MODELS = {
    "mobilenet_v1": lambda: keras.applications.MobileNet(input_shape=(32, 32, 3), alpha=0.25, weights=None),
    "sequential": sequential_cnn,
    "mobilenet_v2": lambda: keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, weights=None),
}
EXPECTED = {  # model -> (spec, candidate layers)
    "mobilenet_v1": ("layers:8", [f"conv_{kind}_{i}" for i in range(10, 14) for kind in ("dw", "pw")]),
    "sequential": ("layers:1", ["conv3"]),  # conv2 exports too but is beyond the default B_compute
    "mobilenet_v2": ("blocks:2", ["block_15_expand", "block_15_depthwise", "block_15_project", "block_16_expand",
                                  "block_16_depthwise", "block_16_project", "Conv_1"]),
    "one_block": ("blocks:1", ["stem", "dw", "project", "head"]),
}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """name -> (metadata, sidecar dict, log text) of the no-flags export, made once per model; the
    one-block net through the CLI (``export --keras-model`` without ``--candidates``)."""
    cache: dict[str, tuple[dict, dict, str]] = {}

    def export(name: str) -> tuple[dict, dict, str]:
        if name not in cache:
            out = tmp_path_factory.mktemp(name) / "m.tflite"
            handler, logger = _Capture(), logging.getLogger("tflite_train.converters")
            level = logger.level
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)
            try:
                if name == "one_block":
                    model_path = out.parent / "m.keras"
                    one_block_net().save(model_path)
                    assert main(["export", "--keras-model", str(model_path), "--out", str(out), "--capacity", "4"]) == 0
                    metadata = _metadata(out)
                else:
                    metadata = write_export(ExportConfig(candidates=AUTO, **FAST), out, MODELS[name]()).metadata
            finally:
                logger.removeHandler(handler)
                logger.setLevel(level)
            sidecar = json.loads(out.with_suffix(".tflite.config.json").read_text())
            cache[name] = (metadata, sidecar, "\n".join(handler.lines))
        return cache[name]

    return export


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname}: {record.getMessage()}")


def _metadata(path) -> dict:
    from tflite_train.runtime import TrainableModel

    return TrainableModel(path).metadata


def _cheapest_candidate_bytes(metadata: dict) -> tuple[int, float]:
    """(cheapest candidate's backward memory as adapt costs it by default, the default B_mem)."""
    table = layer_table(metadata)
    costs = [backward_cost(table, {name: channel_count(table[name].out_channels, 0.25)}, optimizer="adam").total_bytes
             for name in metadata["candidates"]]
    return min(costs), scaled_memory_budget(table)


@pytest.mark.parametrize("name", ["mobilenet_v1", "sequential", "one_block", "mobilenet_v2"])
def test_no_flags_export_chooses_records_and_fits_the_default_budget(exports, name):
    metadata, sidecar, log = exports(name)
    spec, layers = EXPECTED[name]
    assert metadata["candidates"] == layers
    assert sidecar["candidates"] == spec and metadata["config"]["candidates"] == spec  # reproducible
    cheapest, budget = _cheapest_candidate_bytes(metadata)
    assert cheapest <= budget
    line = [entry for entry in log.splitlines() if "--candidates" in entry]
    assert len(line) == 1 and line[0].startswith(f"INFO: candidates {spec} ({len(layers)} layers, ")


@pytest.mark.parametrize("name", ["mobilenet_v1", "sequential"])
def test_recorded_spec_reproduces_the_choice(exports, name):
    metadata, sidecar, _ = exports(name)
    again = prepare_model(MODELS[name](), ExportConfig(**{**sidecar, "input_size": None}))
    assert [again.table.layers[i].name for i in again.candidates] == metadata["candidates"]


def test_explicit_candidates_and_builtin_defaults_are_unchanged():
    model = sequential_cnn()
    assert prepare_model(model, ExportConfig(**FAST, candidates="layers:3")).candidate_spec == "layers:3"
    with pytest.raises(RegionError, match="no blocks"):  # only "auto" chooses; "" still means blocks:2
        prepare_model(model, ExportConfig(**FAST))


def test_region_shrinks_past_a_layer_without_gradient():
    blocks = prepare_model(norm_in_the_middle(True), ExportConfig(**FAST, candidates=AUTO))
    assert blocks.candidate_spec == "blocks:1"  # blocks:2 would train through 'ln'
    assert [blocks.table.layers[i].name for i in blocks.candidates] == ["b2_dw", "b2_project", "c", "d"]
    plain = prepare_model(norm_in_the_middle(False), ExportConfig(**FAST, candidates=AUTO))
    assert plain.candidate_spec == "layers:1"  # 'c' exports too but is beyond the default B_compute
    assert [plain.table.layers[i].name for i in plain.candidates] == ["d"]
    with pytest.raises(RegionError, match="'ln'"):
        prepare_model(norm_in_the_middle(False), ExportConfig(**FAST, candidates="layers:3"))


def test_densenet_gets_at_most_the_top_max_auto_layers(caplog, monkeypatch):
    """DenseNet121 at 32 px (no blocks): every one of its top 81 layers is trainable alone under the default
    budget, and all 81 took > 6.5 min to export; the default is the top MAX_AUTO_LAYERS = 20, of which the
    budget can train some. An explicit spec is not capped."""
    import tflite_train.converters.candidate_choice

    def dense():
        return keras.applications.DenseNet121(input_shape=(32, 32, 3), weights=None)

    with caplog.at_level(logging.INFO, logger="tflite_train.converters"):
        prepared = prepare_model(dense(), ExportConfig(**FAST, candidates=AUTO))
    assert MAX_AUTO_LAYERS == 20 and prepared.candidate_spec == "layers:20"
    names = [layer.name for layer in prepared.table.layers]
    assert [names[i] for i in prepared.candidates] == names[-20:]
    choice = [r.getMessage() for r in caplog.records if r.getMessage().startswith("candidates layers:20")]
    assert len(choice) == 1 and "none fits" not in choice[0]  # some of the 20 fit the default budget
    monkeypatch.setattr(tflite_train.converters.candidate_choice, "MAX_AUTO_LAYERS", 1000)
    assert prepare_model(dense(), ExportConfig(**FAST, candidates=AUTO)).candidate_spec == "layers:81"


def test_model_too_small_for_the_papers_budget_gets_a_default_budget_raised_to_admit_a_candidate(caplog):
    """No layer fits the paper's scaled budget: the unbounded choice, and adapt's default budget for it (the one
    definition, ``sparse.default_budget``) admits one of the candidates; the logged line gives both budgets."""
    from tflite_train.converters.candidate_choice import choose_candidates, default_budget, paper_budget

    with caplog.at_level(logging.INFO, logger="tflite_train.converters"):
        prepared = prepare_model(sequential_cnn(widths=(8, 16)), ExportConfig(**FAST, candidates=AUTO))
    assert prepared.candidate_spec == "layers:2"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    line = next(r.getMessage() for r in caplog.records if "--candidates changes them" in r.getMessage())
    table = prepared.table
    paper, budget = paper_budget(table), default_budget(table, prepared.candidates, "adam")
    assert budget.memory_bytes > paper.memory_bytes
    assert "1 of them fit adapt's default budget (B_mem " in line and ", the paper's (B_mem " in line \
        and "raised to admit one" in line
    choice = choose_candidates(prepared.graph, table, "adam")
    assert choice.budget == budget and choice.paper == paper and len(choice.fitting) == 1
    assert sparse_default_budget(table, [table.layers[i].name for i in prepared.candidates], compute_fraction=0.15,
                                 channel_ratio=0.25) == budget


def test_no_candidate_at_all_is_refused_in_one_line_naming_a_feature_layer_that_works(tmp_path, capsys):
    path = tmp_path / "m.keras"
    norm_on_top().save(path)
    out = tmp_path / "out" / "m.tflite"
    assert main(["export", "--keras-model", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tflite-train export: error: no layer can be a candidate: layer 'ln' (GroupNormalization), without "
                   "an on-device gradient, lies between the last trainable layer and the embedding; --feature-layer "
                   "late_relu would export"]
    assert not out.parent.exists()
    works = prepare_model(norm_on_top(), ExportConfig(**FAST, candidates=AUTO, feature_layer="late_relu"))
    assert [works.table.layers[i].name for i in works.candidates] == ["early", "late"]
