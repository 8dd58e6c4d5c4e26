"""tflite_train.converters.cut_choice: which cuts get cache signatures, checked against costs computed by hand."""

import pytest

from tflite_train.converters.cut_choice import block_cuts, cache_cut_indices, lowest_reachable
from tflite_train.sparse.cost_model import full_backward_macs
from tflite_train.sparse.layer_table import LayerSpec, LayerTable


def _table() -> LayerTable:
    """Five 1x1 convs 4 -> 4 at 1x1 pixels, one per block: each has forward = input-gradient =
    weight-gradient MACs 16, and the weight gradient of one output channel costs 4 MACs."""
    roles = ("stem", "conv", "conv", "conv", "final")
    return LayerTable(tuple(LayerSpec(i, f"l{i}", i - 1, role, 1, 1, 4, 4, 1, (1, 1), (1, 1), "relu")
                            for i, role in enumerate(roles)))


def test_costs_by_hand():
    # FullTrain: input gradients of layers 1..4 (4 x 16) + every weight gradient (5 x 16)
    assert full_backward_macs(_table()) == 144


@pytest.mark.parametrize("fraction, reach", [
    (0.25, 2),   # limit 36: layer 2 costs 2 x 16 (input grads of 3, 4) + 4 = 36
    (0.15, 3),   # limit 21.6: layer 3 costs 16 + 4 = 20, layer 2 costs 36
    (0.03, 4),   # limit 4.32: only the top layer (0 + 4)
    (0.02, None),  # limit 2.88: nothing fits
])
def test_lowest_reachable(fraction, reach):
    assert lowest_reachable(_table(), (1, 2, 3, 4), fraction) == reach


@pytest.mark.parametrize("cache_cuts, fraction, cuts", [
    (None, 0.25, (1, 2, 3, 4)),
    (None, 0.15, (1, 3, 4)),   # no selection within 15 % starts at layer 2: its cut is dropped
    (None, 0.03, (1, 4)),
    (None, 0.02, (1,)),        # the lowest candidate always: it serves any selection
    (8, 0.02, (1, 2, 3, 4)),   # an explicit count ignores the budget
    (2, 0.25, (1, 4)),
    (1, 0.25, (1,)),
])
def test_cache_cut_indices(cache_cuts, fraction, cuts):
    assert cache_cut_indices(_table(), (1, 2, 3, 4), cache_cuts, fraction) == cuts


def test_reach_inside_a_block_keeps_the_cut_below_it():
    # layers 1, 2 in block 0 and 3, 4 in block 1: a reach of layer 2 must keep the cut at layer 1
    # (the highest cut at or below it), which is the lowest candidate here
    roles = ("stem", "conv", "conv", "conv", "final")
    blocks = (-1, 0, 0, 1, 1)
    table = LayerTable(tuple(LayerSpec(i, f"l{i}", blocks[i], roles[i], 1, 1, 4, 4, 1, (1, 1), (1, 1), "relu")
                             for i in range(5)))
    assert block_cuts(table, (1, 2, 3, 4)) == (3,)
    assert cache_cut_indices(table, (1, 2, 3, 4), None, 0.25) == (1, 3)
    assert cache_cut_indices(table, (1, 2, 3, 4), None, 0.15) == (1, 3)
