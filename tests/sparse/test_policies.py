"""Selection policies: golden tests on ``abc_table`` (costs by hand in test_layer_selection.py) and
budget checks on the real MCUNet table."""

import math

import numpy as np
import pytest

from tflite_train.architectures import build_layer_table
from tflite_train.sparse import (
    CHANNEL_METHODS,
    CRITERIA,
    MIT_SPARSE_UPDATE_LAYERS,
    POLICIES,
    Budget,
    BudgetError,
    Selection,
    SelectionConfig,
    backward_cost,
    channel_count,
    full_backward_macs,
    get_policy,
    policy_spec,
    random_channels,
    select,
    tinytrain_policy,
)

# Fisher vectors: P_a = 1, P_b = 4, P_c = 1.5 (exact in binary floating point).
# Eq. 3 with |W| = 8, 16, 8 (max 16) and M = 32, 64, 32 (max 64):
#   s_a = 1 / (1/2 * 1/2) = 4;  s_b = 4 / (1 * 1) = 4;  s_c = 1.5 / (1/2 * 1/2) = 6
#   ranking c, then the a/b tie -> deeper b, then a.
FISHER = {
    "a": np.array([0.25, 0.5, 0.125, 0.125]),
    "b": np.array([0.5, 1.5, 1.0, 1.0]),
    "c": np.array([0.5, 1.0]),
}
# Weights (output channel last): b's channel norms 3, 1, 2, 4; c's 1, 2; a's 1, 1, 1, 1.
W_B = np.zeros((1, 1, 4, 4))
W_B[0, 0, 0] = [3.0, 1.0, 2.0, 4.0]
W_C = np.zeros((1, 1, 4, 2))
W_C[0, 0, 0] = [1.0, 2.0]
WEIGHTS = {"a": np.concatenate([np.ones((1, 1, 1, 4)), np.zeros((1, 1, 1, 4))], axis=2), "b": W_B, "c": W_C}


def config(memory=math.inf, **kwargs) -> SelectionConfig:
    base = {"channel_ratio": 0.5, "optimizer": "sgd", "gradient_buffer": False, "budget": Budget(memory_bytes=memory)}
    return SelectionConfig(**{**base, **kwargs})


def test_tinytrain_by_hand(abc_table):
    # 190 B: c (148) then b ({b,c} = 190, exact fit), a ({a,b,c} = 248) skipped.
    # Channels (K_b = 2, K_c = 1): b's Delta 1.5 at 1, then the 1.0 tie at 2, 3 -> 2; c's 1.0 at 1.
    sel = select(abc_table, config(190), fisher=FISHER)
    assert sel == Selection(("b", "c"), {"b": (1, 2), "c": (1,)}, "tinytrain")
    # 189 B: b skipped ({b,c} = 190), a fits ({a,c} = 172). a's top-2 Delta: 0.5 at 1, 0.25 at 0.
    assert select(abc_table, config(189), fisher=FISHER) == Selection(("a", "c"), {"a": (0, 1), "c": (1,)}, "tinytrain")


def test_tinytrain_fisher_only_ablation(abc_table):
    # P ranking b (4), c (1.5), a (1). 189 B: {b:2} = 40 + 128 = 168 ok; {b,c} = 190 no;
    # {a,b} = 4*(6+10) + max(128, 96+4) = 192 no  ->  (b,) only.
    sel = select(abc_table, config(189, criterion="fisher"), fisher=FISHER)
    assert sel.layers == ("b",) and sel.channels["b"] == (1, 2)


def test_tinytrain_compute_budget_as_fraction_and_macs(abc_table):
    # 0.625 * 224 (full backward MACs) = 140: {b, c} (80) fits, +a (160) does not; 80 MACs = {b, c} exactly.
    by_fraction = select(abc_table, config(budget=Budget(compute_fraction=0.625)), fisher=FISHER)
    by_macs = select(abc_table, config(budget=Budget(compute_macs=80)), fisher=FISHER)
    assert by_fraction == by_macs and by_fraction.layers == ("b", "c")


def test_tinytrain_budget_fits_nothing(abc_table):
    with pytest.raises(BudgetError, match="no candidate layer fits"):
        select(abc_table, config(147), fisher=FISHER)
    assert select(abc_table, config(147, on_empty="empty"), fisher=FISHER) == Selection((), {}, "tinytrain")


def test_tinytrain_l2_and_random_channel_ablations(abc_table):
    l2 = select(abc_table, config(190, channel_method="l2"), fisher=FISHER, weights=WEIGHTS)
    assert dict(l2.channels) == {"b": (0, 3), "c": (1,)}  # norms 3,1,2,4 -> 4@3, 3@0; c: 2@1
    rand = select(abc_table, config(190, channel_method="random", seed=5), fisher=FISHER)
    rng = np.random.default_rng(5)  # drawn in forward order: b then c
    assert dict(rand.channels) == {"b": random_channels(4, 2, rng), "c": random_channels(2, 1, rng)}
    assert rand == select(abc_table, config(190, channel_method="random", seed=5), fisher=FISHER)


def test_tinytrain_l2_layer_ranking(abc_table):
    # ||W||: a = 2, b = sqrt(9+1+4+16) = sqrt(30), c = sqrt(5): ranking b, a, c.
    # 189 B: b 168 ok; {a,b} 192 no; {b,c} 190 no -> (b,).
    sel = select(abc_table, config(189, criterion="l2"), fisher=FISHER, weights=WEIGHTS)
    assert sel.layers == ("b",)


def test_tinytrain_restricted_to_candidates(abc_table):
    sel = select(abc_table, config(10_000), fisher=FISHER, candidates=("a", "b"))
    assert sel.layers == ("a", "b")
    with pytest.raises(ValueError, match="no Delta vector for candidate layers"):
        select(abc_table, config(), fisher={"a": FISHER["a"]}, candidates=("a", "b"))
    with pytest.raises(ValueError, match="tinytrain needs fisher"):
        select(abc_table, config())


def test_baselines(abc_table):
    assert select(abc_table, config(policy="none")).is_empty
    assert select(abc_table, config(policy="LastLayer")) == Selection(("c",), {"c": (0, 1)}, "last_layer")
    assert select(abc_table, config(policy="last_layer"), candidates=("b", "a")).layers == ("b",)
    full = select(abc_table, config(policy="FullTrain"))
    assert full.layers == ("a", "b", "c") and full.channel_counts() == {"a": 4, "b": 4, "c": 2}


def test_sparse_update_from_meta_training_fisher(abc_table):
    # Task potentials a: 2, 0; b: 0, 8; c: 1, 2 -> means 1, 4, 1.5 -> same ranking as FISHER: c, b, a.
    tasks = [
        {"a": np.full(4, 0.5), "b": np.zeros(4), "c": np.array([1.0, 0.0])},
        {"a": np.zeros(4), "b": np.full(4, 2.0), "c": np.array([1.0, 1.0])},
    ]
    sel = select(abc_table, config(190, policy="SparseUpdate"), fisher_tasks=tasks, weights=WEIGHTS)
    # Static channels by weight magnitude: b -> (0, 3), c -> (1,).
    assert sel == Selection(("b", "c"), {"b": (0, 3), "c": (1,)}, "sparse_update")
    # Static: this task's Fisher does not change it.
    assert select(abc_table, config(190, policy="sparse_update"), fisher_tasks=tasks, weights=WEIGHTS,
                  fisher={"a": np.full(4, 99.0), "b": np.zeros(4), "c": np.zeros(2)}) == sel


def test_sparse_update_contribution_criterion(abc_table):
    """The bench's SparseUpdate on a backbone without MIT's list (``bench.methods.SPARSE_UPDATE_CRITERION``):
    the source tasks' mean potential alone ranks b (4), c (1.5), a (1), where Eq. 3 ranks c first; at
    189 B the greedy then takes b alone ({b,c} = 190 and {a,b} = 192 do not fit,
    ``test_tinytrain_fisher_only_ablation``), while Eq. 3 takes c and a ({a,c} = 172)."""
    tasks = [
        {"a": np.full(4, 0.5), "b": np.zeros(4), "c": np.array([1.0, 0.0])},
        {"a": np.zeros(4), "b": np.full(4, 2.0), "c": np.array([1.0, 1.0])},
    ]
    contribution = select(abc_table, config(189, policy="sparse_update", criterion="fisher"), fisher_tasks=tasks,
                          weights=WEIGHTS)
    assert contribution == Selection(("b",), {"b": (0, 3)}, "sparse_update")  # channels: norms 3 and 4
    eq3 = select(abc_table, config(189, policy="sparse_update"), fisher_tasks=tasks, weights=WEIGHTS)
    assert eq3.layers == ("a", "c")


def test_sparse_update_channels_skip_channels_dead_on_every_source_task(abc_table):
    # Same potentials as test_sparse_update_from_meta_training_fisher (means a 1, b 4, c 1.5 -> b, c
    # under 190 B), but b's channels 0 and 3 (norms 3 and 4, the two largest) and c's channel 1
    # (norm 2) have Delta = 0 on every source task: no gradient, so the live channels go first.
    tasks = [
        {"a": np.full(4, 0.5), "b": np.zeros(4), "c": np.array([1.0, 0.0])},
        {"a": np.zeros(4), "b": np.array([0.0, 4.0, 4.0, 0.0]), "c": np.array([2.0, 0.0])},
    ]
    sel = select(abc_table, config(190, policy="sparse_update"), fisher_tasks=tasks, weights=WEIGHTS)
    assert sel == Selection(("b", "c"), {"b": (1, 2), "c": (0,)}, "sparse_update")
    # A fixed layer list uses the source tasks' liveness too; without them, the plain norm order.
    fixed = config(190, policy="sparse_update", layers=("b", "c"))
    assert select(abc_table, fixed, fisher_tasks=tasks, weights=WEIGHTS).channels == {"b": (1, 2), "c": (0,)}
    assert select(abc_table, fixed, weights=WEIGHTS).channels == {"b": (0, 3), "c": (1,)}
    # Live on one task is live.
    tasks[0]["b"] = np.array([0.0, 0.0, 0.0, 1e-9])
    assert select(abc_table, config(190, policy="sparse_update"), fisher_tasks=tasks,
                  weights=WEIGHTS).channels["b"] == (2, 3)
    with pytest.raises(ValueError, match="has no Fisher vector for candidate layers"):
        select(abc_table, fixed, fisher_tasks=[{"b": np.ones(4), "c": np.ones(2)}], weights=WEIGHTS)
    with pytest.raises(ValueError, match="fisher_tasks must not be empty"):
        select(abc_table, fixed, fisher_tasks=[], weights=WEIGHTS)


def test_sparse_update_fixed_layer_list(abc_table):
    # Priority a, c under 189 B: {a:2} 152 ok, {a,c} 172 ok.
    sel = select(abc_table, config(189, policy="sparse_update", layers=("a", "c")), weights=WEIGHTS)
    assert sel.layers == ("a", "c") and sel.channels["a"] == (0, 1)  # a's norms all 1 -> lowest indices
    with pytest.raises(ValueError, match="needs fisher_tasks"):
        select(abc_table, config(policy="sparse_update"), weights=WEIGHTS)
    with pytest.raises(ValueError, match="weights are needed"):
        select(abc_table, config(policy="sparse_update", layers=("a",)))
    with pytest.raises(ValueError, match="not candidate layers"):
        select(abc_table, config(policy="sparse_update", layers=("c",)), candidates=("a", "b"), weights=WEIGHTS)


def test_policy_capabilities_are_attributes_of_the_registry():
    capabilities = {name: (spec.trains, spec.budgeted, spec.needs_fisher, spec.static_ranking, spec.weight_channels)
                    for name, spec in POLICIES.items()}
    assert capabilities == {"none": (False, False, False, False, False),
                            "last_layer": (True, False, False, False, False),
                            "full_train": (True, False, False, False, False),
                            "sparse_update": (True, True, False, True, True),
                            "tinytrain": (True, True, True, False, False)}
    assert policy_spec("Tiny-Train") is POLICIES["tinytrain"] and POLICIES["tinytrain"].select is tinytrain_policy
    with pytest.raises(ValueError, match="unknown policy 'magic'"):
        policy_spec("magic")


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("criterion, channel_method", [("tinytrain", "fisher"), ("l2", "fisher"), ("fisher", "l2"),
                                                       ("fisher_memory", "random")])
def test_policy_attributes_say_what_select_reads(abc_table, policy, criterion, channel_method):
    """``needs_weights`` / ``needs_fisher`` are true exactly when ``select`` refuses to run without the
    candidate kernels / this task's Fisher (the inputs adapt computes only when asked)."""
    spec = policy_spec(policy)
    cfg = config(policy=policy, budget=Budget(), criterion=criterion, channel_method=channel_method,
                 layers=("b", "c") if spec.static_ranking else None)
    inputs = {"fisher": FISHER, "weights": WEIGHTS}

    def refuses_without(name: str) -> bool:
        try:
            select(abc_table, cfg, **{k: v for k, v in inputs.items() if k != name})
        except ValueError as err:
            return name in str(err)
        return False

    assert refuses_without("weights") == spec.needs_weights(criterion, channel_method), policy
    assert refuses_without("fisher") == spec.needs_fisher, policy
    assert (select(abc_table, cfg, **inputs).layers != ()) == spec.trains, policy


def test_policy_registry():
    assert set(POLICIES) == {"none", "last_layer", "full_train", "sparse_update", "tinytrain"}
    for alias in ("TinyTrain", "tinytrain", "TINYTRAIN", "tiny-train"):
        assert get_policy(alias) is tinytrain_policy
    assert SelectionConfig(policy="Last-Layer").policy == "last_layer"
    with pytest.raises(ValueError, match="unknown policy 'magic'; known policies: none, last_layer"):
        get_policy("magic")
    with pytest.raises(ValueError, match="unknown policy"):
        SelectionConfig(policy="magic")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"channel_ratio": 0}, "ratio must be a number in"),
        ({"criterion": "entropy"}, "criterion must be one of"),
        ({"channel_method": "best"}, "channel_method must be one of"),
        ({"on_empty": "skip"}, "on_empty must be one of"),
        ({"optimizer": "rmsprop"}, "optimizer must be one of"),
        ({"batch_size": 0}, "batch_size must be an int >= 1"),
        ({"seed": -1}, "seed must be an int >= 0"),
        ({"layers": "b07_expand"}, "layers must be a non-empty sequence"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SelectionConfig(**kwargs)


def test_negative_and_nan_budgets_are_rejected():
    with pytest.raises(ValueError, match="memory_bytes"):
        SelectionConfig(budget=Budget(memory_bytes=-1))
    with pytest.raises(ValueError, match="compute_fraction"):
        SelectionConfig(budget=Budget(compute_fraction=float("nan")))


# ---------------------------------------------------------------- the real MCUNet table

MIB = 2**20


@pytest.fixture(scope="module")
def mcunet():
    return build_layer_table("mcunet", 128)


def synthetic_fisher(table, seed):
    rng = np.random.default_rng(seed)
    return {layer.name: rng.exponential(size=layer.out_channels) * 10.0 ** rng.uniform(-3, 1) for layer in table}


def synthetic_weights(table, seed):
    rng = np.random.default_rng(seed)
    return {layer.name: rng.normal(size=(layer.fan_in, layer.out_channels)) for layer in table}


@pytest.mark.parametrize("criterion", CRITERIA)
@pytest.mark.parametrize("channel_method", CHANNEL_METHODS)
@pytest.mark.parametrize("seed", [0, 1])
def test_mcunet_tinytrain_respects_both_budgets(mcunet, criterion, channel_method, seed):
    budget = Budget(memory_bytes=MIB, compute_fraction=0.15)
    cfg = SelectionConfig(budget=budget, criterion=criterion, channel_method=channel_method, seed=seed)
    fisher = synthetic_fisher(mcunet, seed)
    sel = select(mcunet, cfg, fisher=fisher, weights=synthetic_weights(mcunet, seed))
    cost = sel.cost(mcunet)
    assert not sel.is_empty
    assert cost.total_bytes <= MIB
    assert cost.backward_macs <= 0.15 * full_backward_macs(mcunet)  # B_compute: 15 % of the full backward pass
    assert sel.channel_counts() == {n: channel_count(mcunet[n].out_channels, 0.25) for n in sel.layers}
    # Greedy maximality: adding any unselected layer breaks a budget (costs grow with the set).
    counts = sel.channel_counts()
    for layer in mcunet:
        if layer.name not in counts:
            grown = backward_cost(mcunet, {**counts, layer.name: channel_count(layer.out_channels, 0.25)})
            assert not budget.admits(grown, mcunet), layer.name
    if channel_method == "fisher":
        for name in sel.layers:
            chosen = fisher[name][list(sel.channels[name])]
            others = np.delete(fisher[name], list(sel.channels[name]))
            assert others.size == 0 or chosen.min() >= others.max()
    mask = sel.channel_mask(mcunet, mcunet.names)
    assert mask.shape == (sum(layer.out_channels for layer in mcunet),)
    assert int(mask.sum()) == sum(counts.values())


def test_mcunet_last_layer_is_the_papers_035_mb(mcunet):
    sel = select(mcunet, SelectionConfig(policy="last_layer"))
    assert sel.layers == ("b13_project",)
    # (576 + 1) * 160 params * 4 B = 369,280 B = 0.352 MiB -> the paper's 0.35 MB.
    assert sel.cost(mcunet).updated_weight_bytes == 369_280
    assert round(sel.cost(mcunet).updated_weight_bytes / MIB, 2) == 0.35


def test_mcunet_sparse_update_static_policies(mcunet):
    budget = Budget(memory_bytes=MIB)
    weights = synthetic_weights(mcunet, 0)
    mit = select(mcunet, SelectionConfig(policy="sparse_update", budget=budget, channel_ratio=0.5,
                                         layers=MIT_SPARSE_UPDATE_LAYERS["mcunet"]), weights=weights)
    assert set(mit.layers) <= set(MIT_SPARSE_UPDATE_LAYERS["mcunet"]) and mit.layers
    assert mit.cost(mcunet).total_bytes <= MIB
    tasks = [synthetic_fisher(mcunet, seed) for seed in range(4)]
    static = select(mcunet, SelectionConfig(policy="sparse_update", budget=budget), fisher_tasks=tasks, weights=weights)
    assert static.layers and static.cost(mcunet).total_bytes <= MIB


def test_mcunet_full_train(mcunet):
    full = select(mcunet, SelectionConfig(policy="full_train"))
    assert len(full.layers) == 42 and full.cost(mcunet).updated_params == sum(
        layer.out_channels * (layer.fan_in + 1) for layer in mcunet
    )


def test_config_to_dict_is_json_ready():
    import json

    cfg = SelectionConfig(policy="SparseUpdate", budget=Budget(memory_bytes=MIB, compute_fraction=0.15),
                          layers=("b07_expand",))
    data = json.loads(json.dumps(cfg.to_dict()))
    assert data["policy"] == "sparse_update"
    assert data["budget"] == {"memory_bytes": MIB, "compute_macs": None, "compute_fraction": 0.15}
    assert data["layers"] == ["b07_expand"] and data["channel_ratio"] == 0.25
    assert SelectionConfig().to_dict()["budget"]["memory_bytes"] is None  # unlimited
