import json

import pytest

from tflite_train.sparse import LayerSpec, LayerTable, resolve_layers


def _spec(index, name="l", **overrides):
    fields = dict(index=index, name=name, block=0, role="expand", kernel=1, stride=1, in_channels=4,
                  out_channels=8, groups=1, in_hw=(4, 4), out_hw=(4, 4), activation="relu6")
    fields.update(overrides)
    return LayerSpec(**fields)


def test_json_round_trip():
    table = LayerTable((_spec(0, "a"), _spec(1, "b", role="depthwise", in_channels=8, groups=8, kernel=3)))
    assert LayerTable.from_list(json.loads(json.dumps(table.to_list()))) == table


def test_lookup_by_name_and_index():
    table = LayerTable((_spec(0, "a"), _spec(1, "b")))
    assert table["b"].index == 1 and table[0].name == "a"
    assert resolve_layers(table, ["b", 0, "a"]) == (0, 1)


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"role": "head"}, "role must be one of"),
        ({"activation": "gelu"}, "activation must be one of"),
        ({"out_channels": 0}, "out_channels must be a positive int; got 0"),
        ({"groups": 3}, "groups=3 must divide"),
    ],
)
def test_layer_spec_validation(overrides, match):
    with pytest.raises(ValueError, match=match):
        _spec(0, **overrides)


def test_table_validation():
    with pytest.raises(ValueError, match="must not be empty"):
        LayerTable(())
    with pytest.raises(ValueError, match="indices must be 0..n-1"):
        LayerTable((_spec(1),))
    with pytest.raises(ValueError, match="duplicate layer name"):
        LayerTable((_spec(0, "a"), _spec(1, "a")))
    with pytest.raises(ValueError, match="unknown keys"):
        LayerSpec.from_dict({**_spec(0).to_dict(), "extra": 1})


def test_last_blocks():
    table = LayerTable((
        _spec(0, "stem", block=-1, role="stem"), _spec(1, "b0", block=0), _spec(2, "b1", block=1),
        _spec(3, "b1p", block=1, role="project"), _spec(4, "final", block=2, role="final"),
    ))
    assert table.num_blocks == 2
    assert table.last_blocks(1) == (2, 3, 4)
    with pytest.raises(ValueError, match="k must be an int in 1..2; got 3"):
        table.last_blocks(3)
