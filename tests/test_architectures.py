"""The layer tables of the paper's backbones against the paper's Table 5 (TF-free)."""

import pytest

from tflite_train.architectures import BACKBONES, build_layer_table, get_config
from tflite_train.paper_figures import ARCHITECTURES
from tflite_train.sparse import total_forward_macs, total_weights


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_matches_paper_table5(name):
    table = build_layer_table(name, 128)
    paper = ARCHITECTURES[name]
    assert len(table) == paper.layers
    assert table.num_blocks == paper.blocks
    assert total_weights(table) == pytest.approx(paper.params, rel=1e-3)
    assert total_forward_macs(table) == pytest.approx(paper.macs, rel=0.01)


def test_exact_counts():
    assert [(len(t), t.num_blocks, total_weights(t), total_forward_macs(t))
            for t in (build_layer_table(n, 128) for n in ("mcunet", "mbv2", "proxyless"))] == [
        (42, 14, 463216, 22453504), (52, 17, 288864, 17449728), (61, 20, 357680, 19209728)]


@pytest.mark.parametrize("name", sorted(BACKBONES))
def test_structure(name):
    table = build_layer_table(name, 128)
    config = get_config(name)
    assert table.layers[0].name == "stem" and table.layers[0].stride == 2
    assert table.layers[-1].out_hw == (4, 4) if config.total_stride == 32 else True
    assert table.layers[-1].out_channels == config.feature_dim
    for prev, layer in zip(table.layers, table.layers[1:]):
        assert layer.in_hw == prev.out_hw and layer.in_channels == prev.out_channels
    roles = {layer.role for layer in table}
    assert {"stem", "depthwise", "project"} <= roles


def test_odd_input_and_grey_channels():
    table = build_layer_table("mcunet", (45, 37), in_channels=1)
    assert table.layers[0].in_hw == (45, 37) and table.layers[0].in_channels == 1
    assert table.layers[0].out_hw == (23, 19)  # ceil(45/2), ceil(37/2)
    assert table.layers[-1].out_hw == (2, 2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"backbone": "resnet50"}, "backbone must be one of .*got 'resnet50'"),
        ({"backbone": "mcunet", "input_size": 16}, "input_size must be >= 32 .*got 16"),
        ({"backbone": "mcunet", "input_size": (64, 8)}, r"got \(64, 8\)"),
        ({"backbone": "mcunet", "input_size": 64.0}, "input_size must be an int"),
        ({"backbone": "mcunet", "in_channels": 0}, "in_channels must be a positive int; got 0"),
        ({"backbone": "tiny", "in_channels": -3}, "got -3"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        build_layer_table(**kwargs)
