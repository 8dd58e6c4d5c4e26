"""The Selection result type: channel mask in candidate order, cost, JSON round trip, validation."""

import numpy as np
import pytest

from tflite_train.sparse import Selection, backward_cost


def test_channel_mask_in_candidate_order(abc_table):
    sel = Selection(("c", "a"), {"a": (1, 3), "c": (0,)}, "test")
    # candidates a (4), b (4), c (2): S = 10; a's channels 1, 3 at offsets 1, 3; c's channel 0 at 8.
    mask = sel.channel_mask(abc_table, ("a", "b", "c"))
    assert mask.dtype == np.float32
    np.testing.assert_array_equal(mask, [0, 1, 0, 1, 0, 0, 0, 0, 1, 0])
    # Candidate order c, a (not forward order) changes the layout: c first (2), then a (4).
    np.testing.assert_array_equal(sel.channel_mask(abc_table, ("c", "a")), [1, 0, 0, 1, 0, 1])


def test_mask_round_trip(abc_table):
    sel = Selection(("a", "c"), {"a": (1, 3), "c": (0,)})
    mask = sel.channel_mask(abc_table, ("a", "b", "c"))
    assert Selection.from_channel_mask(abc_table, ("a", "b", "c"), mask) == sel
    empty = Selection((), {})
    assert Selection.from_channel_mask(abc_table, ("a", "b", "c"), np.zeros(10)) == empty
    assert empty.is_empty and not sel.is_empty


def test_cost_and_counts(abc_table):
    sel = Selection(("b", "c"), {"b": (0, 2), "c": (1,)})
    assert sel.channel_counts() == {"b": 2, "c": 1}
    assert sel.cost(abc_table, optimizer="sgd", gradient_buffer=False).total_bytes == 190  # see test_layer_selection
    assert sel.cost(abc_table) == backward_cost(abc_table, {"b": 2, "c": 1})


def test_json_round_trip(abc_table):
    sel = Selection(("c", "a"), {"a": (0, 1), "c": (1,)}, "tinytrain")
    text = sel.to_json()
    assert Selection.from_json(text) == sel
    assert hash(Selection.from_json(text)) == hash(sel)
    assert sel.ordered(abc_table).layers == ("a", "c")
    assert '"format":"tflite-train-selection"' in text


def test_selection_is_immutable():
    sel = Selection(("a",), {"a": [0, 2]})
    assert sel.channels["a"] == (0, 2)
    with pytest.raises(TypeError):
        sel.channels["a"] = (1,)  # type: ignore[index]
    with pytest.raises(AttributeError):
        sel.layers = ()  # type: ignore[misc]


@pytest.mark.parametrize(
    "layers, channels, match",
    [
        (("a",), {}, "exactly the selected layers"),
        (("a", "a"), {"a": (0,)}, "must not repeat"),
        (("a",), {"a": ()}, "must not be empty"),
        (("a",), {"a": (2, 1)}, "sorted, unique"),
        (("a",), {"a": (1, 1)}, "sorted, unique"),
        (("a",), {"a": (-1,)}, ">= 0"),
    ],
)
def test_bad_selection(layers, channels, match):
    with pytest.raises(ValueError, match=match):
        Selection(layers, channels)


def test_bad_mask_and_candidates(abc_table):
    sel = Selection(("c",), {"c": (2,)})
    with pytest.raises(ValueError, match="index 2 >= C_out = 2"):
        sel.channel_mask(abc_table, ("a", "b", "c"))
    with pytest.raises(ValueError, match="not candidate layers"):
        Selection(("c",), {"c": (0,)}).channel_mask(abc_table, ("a", "b"))
    with pytest.raises(ValueError, match=r"mask must have shape \(10,\)"):
        Selection.from_channel_mask(abc_table, ("a", "b", "c"), np.zeros(9))
    with pytest.raises(ValueError, match="only 0.0 and 1.0"):
        Selection.from_channel_mask(abc_table, ("a", "b", "c"), np.full(10, 0.5))
    with pytest.raises(ValueError, match="format"):
        Selection.from_json('{"format": "other"}')
    with pytest.raises(ValueError, match="malformed"):
        Selection.from_json("{not json")
