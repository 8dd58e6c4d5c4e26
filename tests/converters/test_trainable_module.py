"""Hand-computed goldens for the exporter's helpers."""

import pytest

from converters.trainable_module import candidate_indices, same_padding, state_names
from tflite_train.architectures import build_layer_table


@pytest.mark.parametrize("size,kernel,stride,expected", [
    (33, 3, 2, (1, 1, 17)),   # total = 16*2 + 3 - 33 = 2
    (32, 3, 2, (0, 1, 16)),   # total = 15*2 + 3 - 32 = 1: Keras pads the extra row after
    (9, 5, 2, (2, 2, 5)),     # total = 4*2 + 5 - 9 = 4
    (8, 1, 1, (0, 0, 8)),
])
def test_same_padding(size, kernel, stride, expected):
    assert same_padding(size, kernel, stride) == expected


def test_candidates_last_blocks_and_full():
    table = build_layer_table("tiny", 33)
    top2 = candidate_indices(table, 2)
    assert [table.layers[i].name for i in top2] == [
        "b02_expand", "b02_depthwise", "b02_project", "b03_expand", "b03_depthwise", "b03_project", "final"]
    assert candidate_indices(table, table.num_blocks) == tuple(range(len(table)))
    with pytest.raises(ValueError, match="candidate_blocks"):
        candidate_indices(table, 0)


def test_state_names_per_optimizer():
    table = build_layer_table("tiny", 33)
    cands = candidate_indices(table, 1)
    adam = state_names(table, cands, "adam")
    sgd = state_names(table, cands, "sgd_momentum")
    assert adam[:7] == ["b03_expand_kernel", "b03_expand_bias", "b03_expand_kernel_m", "b03_expand_kernel_v",
                        "b03_expand_bias_m", "b03_expand_bias_v", "b03_expand_mask"]
    assert sgd[:5] == ["b03_expand_kernel", "b03_expand_bias", "b03_expand_kernel_mom", "b03_expand_bias_mom",
                       "b03_expand_mask"]
    assert adam[-4:] == ["prototypes", "num_classes", "step", "learning_rate"]
