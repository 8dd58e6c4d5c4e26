"""Golden tests of the greedy budgeted layer selection on ``abc_table`` (costs by hand; see conftest)."""

import logging

import pytest

from tflite_train.sparse import Budget, BudgetError, backward_cost, greedy_select_layers

SGD = {"optimizer": "sgd", "gradient_buffer": False}

# Hand-computed costs, channel ratio 0.5 (K_a = 2, K_b = 2, K_c = 1), sgd without gradient buffer:
#   {c:1}:          params 1*(4+1) = 5 -> 20 B; saved input 16 floats = 64 B; no ReLU6 at/above c;
#                   activation max(128, 64) = 128;  total 148 B.  MACs: 0 input-grad + 4*4*1 = 16.
#   {b:2, c:1}:     params 2*5 + 5 = 15 -> 60 B; saved (16 + 16) * 4 = 128 B + masks of b (16 bits) = 2 B
#                   -> activation max(128, 130) = 130;  total 190 B.
#                   MACs: input-grad of c 32 + weight-grad 4*4*2 + 16 = 32 + 32 + 16 = 80.
#   {a:2, c:1}:     params 2*(2+1) + 5 = 11 -> 44 B; saved (8 + 16) * 4 = 96 B + masks of a, b (32 bits) = 4 B
#                   -> activation 128;  total 172 B.  MACs: input-grad b + c = 96 + 4*2*2 + 16 = 128.
#   {a:2, b:2, c:1}: params 6 + 10 + 5 = 21 -> 84 B; saved (8+16+16)*4 = 160 + 4 = 164 -> total 248 B.
#                   MACs: 96 + 16 + 32 + 16 = 160.
HAND_COSTS = {
    ("c",): (148, 16),
    ("b", "c"): (190, 80),
    ("a", "c"): (172, 128),
    ("a", "b", "c"): (248, 160),
}
K = {"a": 2, "b": 2, "c": 1}
RANKING = ("c", "b", "a")


def test_hand_costs_match_cost_model(abc_table):
    for layers, (memory, macs) in HAND_COSTS.items():
        cost = backward_cost(abc_table, {n: K[n] for n in layers}, **SGD)
        assert (cost.total_bytes, cost.backward_macs) == (memory, macs), layers


@pytest.mark.parametrize(
    "memory, expected",
    [
        (10_000, ("c", "b", "a")),   # everything fits
        (248, ("c", "b", "a")),      # exact fit of all three (248 B)
        (247, ("c", "b")),           # c 148 ok; +b 190 ok; +a 248 > 247 skipped
        (190, ("c", "b")),           # exact fit of {b, c}
        (189, ("c", "a")),           # +b 190 > 189 skipped, greedy CONTINUES: +a 172 fits
        (171, ("c",)),               # +b 190 and +a 172 both too big
        (148, ("c",)),               # exact fit of {c}
    ],
)
def test_greedy_memory_budget(abc_table, memory, expected):
    assert greedy_select_layers(abc_table, RANKING, Budget(memory_bytes=memory), channel_ratio=0.5, **SGD) == expected


@pytest.mark.parametrize(
    "budget, expected",
    [
        # A fraction is of the full backward pass: 224 MACs here (weight grads 128 + input grads of b, c 96).
        (Budget(compute_fraction=1.0), ("c", "b", "a")),   # 224 MACs: all (160) fit
        (Budget(compute_macs=160), ("c", "b", "a")),       # exact fit of all
        (Budget(compute_fraction=0.625), ("c", "b")),      # 0.625 * 224 = 140: {b,c} 80 fits, +a 160 > 140
        (Budget(compute_macs=80), ("c", "b")),             # exact fit of {b, c}
        (Budget(compute_macs=79), ("c",)),                 # {b,c} 80 > 79; {a,c} 128 > 79
        (Budget(compute_fraction=0.25), ("c",)),           # 56: {b,c} 80 > 56, {a,c} 128 > 56
    ],
)
def test_greedy_compute_budget(abc_table, budget, expected):
    assert greedy_select_layers(abc_table, RANKING, budget, channel_ratio=0.5, **SGD) == expected


def test_greedy_fraction_equals_macs(abc_table):
    results = set()
    for fraction in (0.05, 0.1, 0.3, 0.625, 0.9, 1.25, 2.0):
        kwargs = {"channel_ratio": 0.5, "on_empty": "empty", **SGD}
        as_fraction = greedy_select_layers(abc_table, RANKING, Budget(compute_fraction=fraction), **kwargs)
        as_macs = greedy_select_layers(abc_table, RANKING, Budget(compute_macs=fraction * 224), **kwargs)
        assert as_fraction == as_macs
        results.add(as_fraction)
    # of 224 full backward MACs: 11.2: nothing; 22.4, 67.2: c; 140: b, c; 201.6, 280, 448: all.
    assert results == {(), ("c",), ("c", "b"), ("c", "b", "a")}


def test_both_budgets_bind(abc_table):
    # Memory 250 admits all three (248 B), compute 128 MACs stops a (160): {b, c}.
    budget = Budget(memory_bytes=250, compute_macs=128)
    assert greedy_select_layers(abc_table, RANKING, budget, channel_ratio=0.5, **SGD) == ("c", "b")


def test_order_follows_ranking(abc_table):
    # Ranking a, b, c under 190 B: a alone: params 6 -> 24 B; saved 32 B + 4 B masks; act 128 -> 152 ok.
    # +b: params 16 -> 64 B; saved 96 + 4; act 128 -> 192 > 190 skipped. +c: {a,c} 172 ok.
    assert greedy_select_layers(abc_table, ("a", "b", "c"), Budget(memory_bytes=190), channel_ratio=0.5, **SGD) == ("a", "c")


def test_budget_that_fits_nothing_raises(abc_table):
    # The cheapest single layer is {c:1} at 148 B.
    with pytest.raises(BudgetError, match="no candidate layer fits the budget.*148 B"):
        greedy_select_layers(abc_table, RANKING, Budget(memory_bytes=147), channel_ratio=0.5, **SGD)
    assert issubclass(BudgetError, ValueError)


def test_budget_that_fits_nothing_returns_empty(abc_table, caplog):
    with caplog.at_level(logging.INFO):
        chosen = greedy_select_layers(
            abc_table, RANKING, Budget(compute_macs=15), channel_ratio=0.5, on_empty="empty", **SGD
        )
    assert chosen == ()
    assert "no update" in caplog.text


def test_full_channel_ratio_and_per_layer_ratio(abc_table):
    # Ratio 1.0: {c:2} params 10 -> 40 B + act 128 = 168; {b:4, c:2}: params 30 -> 120 B, act 130 -> 250;
    # {a:4, c:2}: params 12 + 10 = 22 -> 88 B, act max(128, 96 + 4) = 128 -> 216.
    assert greedy_select_layers(abc_table, RANKING, Budget(memory_bytes=250), channel_ratio=1.0, **SGD) == ("c", "b")
    assert greedy_select_layers(abc_table, RANKING, Budget(memory_bytes=249), channel_ratio=1.0, **SGD) == ("c", "a")
    assert greedy_select_layers(abc_table, RANKING, Budget(memory_bytes=215), channel_ratio=1.0, **SGD) == ("c",)
    per_layer = {"a": 0.5, "b": 0.5, "c": 0.5}
    assert greedy_select_layers(abc_table, RANKING, Budget(memory_bytes=190), channel_ratio=per_layer, **SGD) == ("c", "b")


def test_adam_with_gradient_buffer_costs_four_times_the_weights(abc_table):
    # Adam + buffer: optimizer = 3 x weights. {c:1}: 20 + 60 + 128 = 208 B.
    assert greedy_select_layers(abc_table, ("c",), Budget(memory_bytes=208), channel_ratio=0.5) == ("c",)
    with pytest.raises(BudgetError):
        greedy_select_layers(abc_table, ("c",), Budget(memory_bytes=207), channel_ratio=0.5)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"memory_bytes": -1}, ValueError, "memory_bytes must be a number >= 0.*-1"),
        ({"memory_bytes": float("nan")}, ValueError, "memory_bytes must be a number >= 0 \\(not NaN\\)"),
        ({"compute_macs": -5}, ValueError, "compute_macs must be"),
        ({"compute_fraction": float("nan")}, ValueError, "compute_fraction must be"),
        ({"compute_fraction": "0.15"}, ValueError, "compute_fraction must be a number"),
        ({"compute_macs": 1, "compute_fraction": 0.1}, ValueError, "not both"),
    ],
)
def test_bad_budgets(kwargs, error, match):
    with pytest.raises(error, match=match):
        Budget(**kwargs)


def test_bad_greedy_arguments(abc_table):
    with pytest.raises(ValueError, match="on_empty must be one of"):
        greedy_select_layers(abc_table, RANKING, Budget(), channel_ratio=0.5, on_empty="ignore")
    with pytest.raises(ValueError, match="must not repeat"):
        greedy_select_layers(abc_table, ("c", "c"), Budget(), channel_ratio=0.5)
    with pytest.raises(ValueError, match="ratio must be a number in"):
        greedy_select_layers(abc_table, RANKING, Budget(), channel_ratio=0.0)
    with pytest.raises(ValueError, match="does not exist"):
        greedy_select_layers(abc_table, ("zz",), Budget(), channel_ratio=0.5)
