"""Selection policies: TinyTrain's dynamic layer/channel selection and the paper's baselines.

Every policy has the same signature ``policy(table, config, *, candidates=None, fisher=None,
fisher_tasks=None, weights=None) -> Selection`` and is registered in ``POLICIES`` with what it needs and
does (``PolicySpec``: trains, budgeted, needs_fisher, static_ranking, weight_channels; callers ask these,
never the name):

* ``none``          -- no update (empty selection).
* ``last_layer``    -- the deepest candidate conv, all output channels (MCUNet: ``b13_project``,
                       the paper's 0.35 MB LastLayer). Ignores the budget.
* ``full_train``    -- every candidate layer, all channels. Ignores the budget.
* ``sparse_update`` -- STATIC policy decided once offline: layers ranked by the Fisher potential
                       averaged over meta-training tasks, P_bar_l = 1/T sum_t P_{t,l}, scored with
                       ``config.criterion`` (or a fixed priority list ``config.layers``, e.g.
                       ``MIT_SPARSE_UPDATE_LAYERS["mcunet"]``), chosen greedily under the budget;
                       channels = top-K by weight L2 norm (weight magnitude), taken first among the
                       channels with a non-zero Fisher on some source task when ``fisher_tasks``
                       are given (``channel_selection.live_channels``): the BN-folded norm favours
                       dead channels, which get no gradient (issue 28).
* ``tinytrain``     -- DYNAMIC (paper Algorithm 1, lines 1-4): this task's Fisher vectors ->
                       potentials (Eq. 2) -> scores (Eq. 3 or a Table 3 ablation via
                       ``config.criterion``) -> greedy layers under the budget -> top-K channels by
                       Fisher (or ``config.channel_method`` "l2"/"random" for the ablations).

Inputs:
  candidates: Layer names the model can update (metadata ``candidates``); None = every layer of the
    table (for ``tinytrain``: the layers of ``fisher``). Selections only contain candidates.
  fisher: Layer name -> Delta vector f32[C_out] of this task (the ``fisher`` signature's outputs).
  fisher_tasks: A list of such dicts, one per meta-training task (``sparse_update``: its layer
    ranking, and which channels are live).
  weights: Layer name -> weight array with the output channel on the last axis (see
    ``channel_selection``), needed for L2-norm channels or the ``l2`` layer criterion.

K per layer is ``channel_count(C_out, config.channel_ratio)`` throughout, and greedy costs use
``config.optimizer``/``batch_size``/``gradient_buffer``. Random channels are drawn from
``numpy.random.default_rng(config.seed)``, one draw per selected layer in forward order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tflite_train.sparse.budget import Budget
from tflite_train.sparse.channel_selection import (
    CHANNEL_METHODS,
    fisher_channels,
    l2_channels,
    live_channels,
    random_channels,
)
from tflite_train.sparse.cost_model import OPTIMIZER_SLOTS, channel_count
from tflite_train.sparse.fisher import mean_fisher_potentials
from tflite_train.sparse.layer_selection import check_on_empty, greedy_select_layers
from tflite_train.sparse.layer_table import LayerTable, check_candidates
from tflite_train.sparse.scoring import (
    check_criterion,
    check_fisher_shapes,
    check_layer_weights,
    fisher_scores,
    l2_layer_scores,
    multi_objective_scores,
    rank_layers,
)
from tflite_train.sparse.selection import Selection

MIT_SPARSE_UPDATE_LAYERS: Mapping[str, tuple[str, ...]] = {
    "mcunet": ("b07_expand", "b08_expand", "b09_expand", "b10_expand", "b12_expand", "b13_expand"),
}
"""MIT's static SparseUpdate layers (convs 21, 24, 27, 30, 36, 39 of MCUNet; ARCHITECTURES.md)."""

SPARSE_UPDATE_CRITERION = "fisher"
"""SparseUpdate's layer criterion where MIT published no layer list (``sparse_update_policy``'s
``config.criterion``; the bench and ``cost_report`` use it): the source tasks' mean Fisher potential
alone (``scoring``'s "fisher", P_bar_l), greedy under the budgets. MCUNetV3's offline search
maximises the accuracy contribution of the updated layers subject to the memory bound; dividing the
contribution by the layers' memory and compute (Eq. 3) is TinyTrain's own criterion, and giving it to the
baseline made SparseUpdate a static copy of TinyTrain's ranking. On the meta-trained Lite0 @ 128 the Eq. 3
ranking of the source tasks picked only depthwise layers (b12-b15), whose kernels are ~47x larger than the
expand kernels (bench/results/STEP_SCALE.md), so that at any rate that did not hurt it left the
predictions of most line_icons tasks unchanged (35 of 60, issue 28); the contribution ranking picks
b14_depthwise, b15_expand and b15_depthwise (at 3e-3 it changed the predictions of 39 of the 60), an
expand (pointwise) conv among them: MIT's published MCUNet list holds only expand convs, and the paper's
contribution analysis finds the accuracy gain peaking at each block's first pointwise conv (section 3.2,
"Task-Adaptive Sparse Update")."""


@dataclasses.dataclass(frozen=True)
class SelectionConfig:
    """How to select; passed explicitly to ``select`` and the policies.

    Attributes:
      policy: A name in ``POLICIES`` (case, ``_``, ``-`` ignored: "TinyTrain", "last-layer" work);
        stored in canonical form.
      budget: B_mem / B_compute for the budgeted policies (``sparse_update``, ``tinytrain``).
      channel_ratio: Fraction of output channels per selected layer, in (0, 1]
        (``tinytrain``/``sparse_update``; the baselines update all channels).
      criterion: Layer score, one of ``scoring.CRITERIA`` (Eq. 3 = "tinytrain"; Table 3 ablations).
      channel_method: ``tinytrain``'s channel choice, one of ``CHANNEL_METHODS``.
      optimizer, batch_size, gradient_buffer: Cost-model settings for the budget check.
      on_empty: "raise" (BudgetError) or "empty" (no update) when the budget fits no layer.
      seed: Seed of the random channel ablation.
      layers: Optional fixed layer priority list for ``sparse_update`` (instead of Fisher tasks).
    """

    policy: str = "tinytrain"
    budget: Budget = dataclasses.field(default_factory=Budget)
    channel_ratio: float = 0.25
    criterion: str = "tinytrain"
    channel_method: str = "fisher"
    optimizer: str = "adam"
    batch_size: int = 1
    gradient_buffer: bool = True
    on_empty: str = "raise"
    seed: int = 0
    layers: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", canonical_policy_name(self.policy))
        if not isinstance(self.budget, Budget):
            raise TypeError(f"budget must be a Budget; got {type(self.budget).__name__}")
        channel_count(1, self.channel_ratio)  # validates the ratio (ValueError naming it)
        check_criterion(self.criterion)
        if self.channel_method not in CHANNEL_METHODS:
            raise ValueError(f"channel_method must be one of {CHANNEL_METHODS}; got {self.channel_method!r}")
        if self.optimizer not in OPTIMIZER_SLOTS:
            raise ValueError(f"optimizer must be one of {sorted(OPTIMIZER_SLOTS)}; got {self.optimizer!r}")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1; got {self.batch_size!r}")
        check_on_empty(self.on_empty)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0; got {self.seed!r}")
        if self.layers is not None:
            if isinstance(self.layers, str) or not all(isinstance(n, str) for n in self.layers) or not self.layers:
                raise ValueError(f"layers must be a non-empty sequence of layer names; got {self.layers!r}")
            object.__setattr__(self, "layers", tuple(self.layers))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready resolved config (to write beside a run's outputs)."""
        out = dataclasses.asdict(self)
        out["budget"] = self.budget.to_dict()
        out["layers"] = None if self.layers is None else list(self.layers)
        return out


Policy = Callable[..., Selection]


def none_policy(table: LayerTable, config: SelectionConfig | None = None, **_inputs: object) -> Selection:
    """No on-device update: the empty selection."""
    return Selection((), {}, "none")


def last_layer_policy(
    table: LayerTable, config: SelectionConfig | None = None, *, candidates: Sequence[str] | None = None,
    **_inputs: object,
) -> Selection:
    """The deepest candidate layer with all its output channels (budget not applied)."""
    last = _candidates(table, candidates)[-1]
    return Selection((last,), {last: tuple(range(table[last].out_channels))}, "last_layer")


def full_train_policy(
    table: LayerTable, config: SelectionConfig | None = None, *, candidates: Sequence[str] | None = None,
    **_inputs: object,
) -> Selection:
    """Every candidate layer with all output channels (budget not applied)."""
    names = _candidates(table, candidates)
    return Selection(names, {n: tuple(range(table[n].out_channels)) for n in names}, "full_train")


def sparse_update_policy(
    table: LayerTable,
    config: SelectionConfig,
    *,
    candidates: Sequence[str] | None = None,
    fisher_tasks: Sequence[Mapping[str, np.ndarray]] | None = None,
    weights: Mapping[str, np.ndarray] | None = None,
    **_inputs: object,
) -> Selection:
    """Static SparseUpdate: offline layer ranking, greedy under the budget, L2-norm channels.

    The ranking is ``config.layers`` (a fixed priority list) if given, else the candidates ranked by
    ``config.criterion`` over the Fisher potentials averaged across ``fisher_tasks``
    (P_bar_l = 1/T sum_t P_{t,l}; criterion "l2" ranks by weight norms instead).

    Channels: the top-K by weight L2 norm. With ``fisher_tasks`` (whichever ranking is used), the
    channels that are live on some source task (non-zero Delta, ``live_channels``) come first and the
    norm orders each group: a BN-folded kernel's largest norms belong mostly to channels with a dead
    input, which never get a gradient (on the meta-trained Lite0@128 the plain norm order left 34-73 %
    of the chosen channels of b13/b14_depthwise without gradient on target tasks, holding 10-25 % of
    the layer's Fisher; the live-first order: 5-23 %, 59-72 %). Still static: fixed offline, the same
    for every target task. Without ``fisher_tasks`` (a fixed list only): the plain norm order.

    Raises:
      ValueError: neither ``config.layers`` nor ``fisher_tasks``; missing weights; a fixed layer
        that is not a candidate. BudgetError: nothing fits and ``config.on_empty == "raise"``.
    """
    names = _candidates(table, candidates)
    if fisher_tasks is not None:
        fisher_tasks = list(fisher_tasks)
        if not fisher_tasks:
            raise ValueError("fisher_tasks must not be empty (None = no meta-training Fisher)")
        for t, task in enumerate(fisher_tasks):
            check_fisher_shapes(table, task)
            missing = [n for n in names if n not in task]
            if missing:
                raise ValueError(f"fisher_tasks[{t}] has no Fisher vector for candidate layers {missing}")
    if config.layers is not None:
        outside = [n for n in config.layers if n not in names]
        if outside:
            raise ValueError(f"config.layers {outside} are not candidate layers")
        ranking = config.layers
    elif config.criterion == "l2":
        ranking = rank_layers(table, l2_layer_scores(table, _need_weights(table, weights, names)))
    elif fisher_tasks is not None:
        means = mean_fisher_potentials(fisher_tasks)
        ranking = rank_layers(
            table, multi_objective_scores(table, {n: means[n] for n in names}, criterion=config.criterion)
        )
    else:
        raise ValueError("sparse_update needs fisher_tasks (meta-training Fisher dicts) or config.layers")
    chosen = _greedy(table, ranking, config)
    w = _need_weights(table, weights, chosen)
    channels = {
        n: l2_channels(w[n], channel_count(table[n].out_channels, config.channel_ratio),
                       live=None if fisher_tasks is None else live_channels(fisher_tasks, n))
        for n in chosen
    }
    return Selection(chosen, channels, "sparse_update")


def tinytrain_policy(
    table: LayerTable,
    config: SelectionConfig,
    *,
    candidates: Sequence[str] | None = None,
    fisher: Mapping[str, np.ndarray] | None = None,
    weights: Mapping[str, np.ndarray] | None = None,
    **_inputs: object,
) -> Selection:
    """TinyTrain's task-adaptive sparse update (Algorithm 1, lines 1-4).

    P_i = sum_o Delta_{i,o} (Eq. 2) -> s_i (Eq. 3, or ``config.criterion``) -> greedy layers under
    ``config.budget`` -> per selected layer the top-K channels by Delta (``config.channel_method``
    "fisher"), or by weight L2 norm / at random for the ablations.

    Raises:
      ValueError: no ``fisher`` (or missing candidates in it), missing weights where needed.
      BudgetError: nothing fits and ``config.on_empty == "raise"``.
    """
    if fisher is None:
        raise ValueError("tinytrain needs fisher: layer name -> Delta vector of this task")
    check_fisher_shapes(table, fisher)
    names = _candidates(table, candidates if candidates is not None else tuple(fisher))
    missing = [n for n in names if n not in fisher]
    if missing:
        raise ValueError(f"fisher has no Delta vector for candidate layers {missing}")
    if config.criterion == "l2":
        ranking = rank_layers(table, l2_layer_scores(table, _need_weights(table, weights, names)))
    else:
        ranking = rank_layers(table, fisher_scores(table, {n: fisher[n] for n in names}, criterion=config.criterion))
    chosen = _greedy(table, ranking, config)
    rng = np.random.default_rng(config.seed)
    w = _need_weights(table, weights, chosen) if config.channel_method == "l2" else {}
    channels = {}
    for name in chosen:
        k = channel_count(table[name].out_channels, config.channel_ratio)
        if config.channel_method == "fisher":
            channels[name] = fisher_channels(fisher[name], k)
        elif config.channel_method == "l2":
            channels[name] = l2_channels(w[name], k)
        else:
            channels[name] = random_channels(table[name].out_channels, k, rng)
    return Selection(chosen, channels, "tinytrain")


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """A registered policy: its function and what it needs and does (module docstring).

    Attributes:
      name: The canonical name.
      select: The policy function.
      trains: It updates weights (every policy but ``none``).
      budgeted: It ranks layers and picks them greedily under B_mem / B_compute; the others ignore the budgets.
      needs_fisher: It ranks this task's layers by the Fisher of the support set (the model's ``fisher``
        signature, Eq. 2): TinyTrain's dynamic selection.
      static_ranking: It ranks layers once, offline: from the meta-training tasks' Fisher (``fisher_tasks``),
        a fixed list (``config.layers``) or, with neither, the weight norms (criterion "l2"): SparseUpdate.
      weight_channels: It picks channels by weight L2 norm, so it reads the candidate kernels whatever the
        config.
    """

    name: str
    select: Policy
    trains: bool = True
    budgeted: bool = False
    needs_fisher: bool = False
    static_ranking: bool = False
    weight_channels: bool = False

    def needs_weights(self, criterion: str, channel_method: str) -> bool:
        """True when selecting reads the candidate kernels (``weights``): L2-norm channels, or a budgeted
        policy ranking layers or choosing channels by "l2" (``config.criterion`` / ``config.channel_method``)."""
        return self.weight_channels or (self.budgeted and "l2" in (criterion, channel_method))


POLICIES: Mapping[str, PolicySpec] = {spec.name: spec for spec in (
    PolicySpec("none", none_policy, trains=False),
    PolicySpec("last_layer", last_layer_policy),
    PolicySpec("full_train", full_train_policy),
    PolicySpec("sparse_update", sparse_update_policy, budgeted=True, static_ranking=True, weight_channels=True),
    PolicySpec("tinytrain", tinytrain_policy, budgeted=True, needs_fisher=True),
)}
"""Canonical policy name -> its ``PolicySpec`` (the functions share one signature)."""


def canonical_policy_name(name: str) -> str:
    """Maps "TinyTrain", "last-layer", "LastLayer", "sparse_update" ... to a key of ``POLICIES``.

    Raises:
      ValueError: unknown policy name (lists the known ones).
    """
    if not isinstance(name, str):
        raise ValueError(f"policy must be a policy name (str); got {name!r}")
    key = name.strip().lower().replace("_", "").replace("-", "")
    for canonical in POLICIES:
        if canonical.replace("_", "") == key:
            return canonical
    raise ValueError(f"unknown policy {name!r}; known policies: {', '.join(POLICIES)}")


def policy_spec(name: str) -> PolicySpec:
    """The registered policy ``name`` (see ``canonical_policy_name``) and what it needs and does.

    Raises:
      ValueError: unknown policy name (lists the known ones).
    """
    return POLICIES[canonical_policy_name(name)]


def get_policy(name: str) -> Policy:
    """The policy function registered under ``name`` (see ``canonical_policy_name``)."""
    return policy_spec(name).select


def select(
    table: LayerTable,
    config: SelectionConfig,
    *,
    candidates: Sequence[str] | None = None,
    fisher: Mapping[str, np.ndarray] | None = None,
    fisher_tasks: Sequence[Mapping[str, np.ndarray]] | None = None,
    weights: Mapping[str, np.ndarray] | None = None,
) -> Selection:
    """Runs ``config.policy`` on the given inputs; the result has its layers in forward order."""
    if not isinstance(config, SelectionConfig):
        raise TypeError(f"config must be a SelectionConfig; got {type(config).__name__}")
    return get_policy(config.policy)(
        table, config, candidates=candidates, fisher=fisher, fisher_tasks=fisher_tasks, weights=weights
    )


def _candidates(table: LayerTable, candidates: Sequence[str] | None) -> tuple[str, ...]:
    """Candidate names in forward order (None = all layers); validated, no repeats, non-empty."""
    if candidates is None:
        return table.names
    return tuple(sorted(check_candidates(table, candidates), key=table.index_of))


def _greedy(table: LayerTable, ranking: Sequence[str], config: SelectionConfig) -> tuple[str, ...]:
    """Greedy layers under ``config.budget``, returned in forward order."""
    chosen = greedy_select_layers(
        table, ranking, config.budget, channel_ratio=config.channel_ratio, optimizer=config.optimizer,
        batch_size=config.batch_size, gradient_buffer=config.gradient_buffer, on_empty=config.on_empty,
    )
    return tuple(sorted(chosen, key=table.index_of))


def _need_weights(
    table: LayerTable, weights: Mapping[str, np.ndarray] | None, names: Sequence[str]
) -> dict[str, np.ndarray]:
    """The weight arrays of ``names`` (output channel last, fan_in * C_out values), validated."""
    if not names:
        return {}
    if weights is None:
        raise ValueError(f"weights are needed (L2 norms) for layers {list(names)}; got None")
    missing = [n for n in names if n not in weights]
    if missing:
        raise ValueError(f"weights has no array for layers {missing}")
    out = {}
    for name in names:
        array = check_layer_weights(table, name, weights[name])
        if array.shape[-1] != table[name].out_channels:
            raise ValueError(
                f"weights[{name!r}] must have the output channel last (C_out = {table[name].out_channels}); "
                f"got shape {array.shape}"
            )
        out[name] = array
    return out
