"""``BenchConfig``: everything one benchmark run depends on (frozen; written beside the outputs)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

SECTIONS = ("procedure", "accuracy", "int8", "continual", "backward_cost", "timing", "ablations", "plots")
"""The benchmark's sections, in report order."""
DEFAULT_SECTIONS = tuple(s for s in SECTIONS if s not in ("int8", "continual"))
"""The sections a run without ``--section`` runs: ``int8`` exports an int8 model per backbone run (Lite0
@128: ~9 GB of RAM) and is asked for explicitly, usually as an update of a finished run; so is ``continual``
(issue 42's class-incremental section, ``bench.continual_section``: 7 adaptations per task)."""

IMAGENET = "imagenet"
"""``BackboneRun`` weights value: EfficientNet-Lite0's ImageNet weights (``tflite_train.models.efficientnet_lite0``)."""

LITE0 = "efficientnet_lite0"
"""The backbone name of EfficientNet-Lite0 (built by ``tflite_train.models``, exported through the Keras path)."""


@dataclasses.dataclass(frozen=True)
class BackboneRun:
    """One backbone of the paired accuracy section.

    Attributes:
      key: Short unique name (model files, results keys), e.g. ``"mcunet_64"``.
      backbone: ``"mcunet"`` (any built-in of ``tflite_train.architectures``) or ``"efficientnet_lite0"``.
      input_size: Input side in pixels.
      weights: The meta-trained weights (every policy's row): a Keras ``.weights.h5`` (a built-in
        backbone's BN form; for Lite0 the weights of ``build_efficientnet_lite0``), or None = not
        available (the rows then run on ``baseline_weights`` and the meta-training delta is not measured).
      baseline_weights: The same backbone's weights *without* meta-training (the "TinyTrain without
        meta-training" row): MCUNet's pre-training stage, Lite0's ImageNet weights (``"imagenet"``).
        Both None: seeded initialisation (tests).
      candidate_blocks: k of the sparse export (the last k blocks are candidates).
    """

    key: str
    backbone: str
    input_size: int
    weights: str | None
    baseline_weights: str | None
    candidate_blocks: int

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key.replace("_", "").isalnum():
            raise ValueError(f"backbone run key must be a non-empty [A-Za-z0-9_] name; got {self.key!r}")
        for name in ("input_size", "candidate_blocks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"backbone run {self.key}: {name} must be a positive int; got {value!r}")

    @property
    def meta_trained(self) -> bool:
        """True when the rows run on meta-trained weights distinct from the baseline."""
        return self.weights is not None and self.weights != self.baseline_weights

    @property
    def label(self) -> str:
        name = {"mcunet": "MCUNet", LITE0: "EfficientNet-Lite0"}.get(self.backbone, self.backbone)
        return f"{name} @ {self.input_size}"


MCUNET_64 = BackboneRun("mcunet_64", "mcunet", 64, "weights/mcunet_64_meta.weights.h5",
                        "weights/meta_ablation/pretrain.weights.h5", 7)
"""The shipped meta-trained MCUNet@64; without meta-training: the pre-training stage of ``weights/meta_ablation``."""
LITE0_128 = BackboneRun("lite0_128", LITE0, 128, "weights/efficientnet_lite0/lite0_128_meta.weights.h5", IMAGENET, 6)
"""The shipped default, EfficientNet-Lite0@128 with its meta-trained upper blocks; without meta-training: the
ImageNet weights (``--lite0-weights imagenet`` runs every Lite0 row on those)."""


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """One benchmark run.

    Attributes:
      cache_dir: Data cache (``tflite-train data prepare``); its ``target`` data sets are the
        cross-domain targets.
      size_caches: Caches of the same data sets at other image sizes (``data prepare --image-size``);
        each backbone reads the smallest cache (of ``cache_dir`` and these) at or above its input size,
        so no model sees upscaled images (``bench.tasks.cache_for_size``). Missing folders are skipped.
      out_dir: Where ``BENCHMARKS.md``, the PNGs, ``results.json`` and ``config.json`` go.
      model_dir: Where the exported ``.tflite`` models are cached (reused when their config matches).
      backbone, input_size: The demo backbone and resolution of the accuracy/timing/ablation sections.
      weights: Keras BN-form weights exported for the accuracy runs (None = seeded init).
      train_variants: Depth-specific train signatures per export (``ExportConfig.train_variants``;
        0 = only the general ``train_step``: a faster export, slower steps for shallow selections).
      candidate_blocks: k of the sparse export (LastLayer, SparseUpdate, TinyTrain); FullTrain uses a
        second export with every block a candidate.
      targets: Target data sets (None = every ``target`` of the cache).
      tasks: N tasks (episodes) per target; the same seeded episodes for every policy.
      seed: Seed of episodes and adaptation.
      min_ways, max_ways, max_query, max_support_per_class, max_support_total: Episode sampler bounds
        (Meta-Dataset's are 5/50/10/100/500; smaller here to fit the machine).
      epochs: Passes over each task's support set (the paper's protocol: "training using all the
        samples (e.g. 25) for 40 iterations", appendix A.2): ``epochs * ceil(N_support / batch)``
        steps, so every method sees each support image ``epochs`` times (augmented). None = a fixed
        ``iterations`` steps instead.
      iterations: Optimizer steps per task when ``epochs`` is None.
      learning_rates: Candidate Adam learning rates (with ``epochs_grid``: each policy gets the pair
        with the best mean accuracy on the validation episodes, found by successive halving;
        ``bench.successive_halving``). One rate and one epoch count = no tuning runs.
      tuning_tasks: Validation episodes per target (from the validation pool, never reported): the
        last successive-halving round runs its settings on all of them.
      halving_rounds: Validation episodes per target of each successive-halving round before the last
        (increasing; entries >= ``tuning_tasks`` are ignored, so ``--tuning-tasks 1`` needs no
        other change). () = every setting on every tuning task.
      halving_eta: After each round but the last, each policy keeps its best ceil(k / eta) of k settings.
      full_train_batch: FullTrain's batch. Default 1, as the other policies (the paper's sparse
        methods; FullTrain then takes as many optimizer steps per pass as they do); the paper's
        FullTrain uses 100.
      memory_budget_mib: B_mem as set for MCUNet at 128x128 (the paper's 1 MiB); each model's B_mem
        is the library's ``tflite_train.sparse.scaled_memory_budget`` of it, raised only where it
        admits no candidate layer (the CLI's and the demo's default, ``sparse.default_budget``;
        ``policy_runs.memory_budget_bytes``). The cost tables (section 2) use it
        unscaled for every backbone, as the paper's Tables 2 and 6 do.
      compute_fraction: B_compute as a fraction of FullTrain's backward MACs (paper: "15 % of total
        MACs"; see ``bench.policy_runs.compute_budget_macs`` for why the backward MACs).
      channel_ratio: TinyTrain's channel ratio; ``sparse_update_channel_ratio`` SparseUpdate's.
      ablation_target, ablation_tasks: The target and N of the ablation section.
      channel_ratios: Channel ratios of the channel-method ablation (Figure 5).
      timing_runs: Timed adaptations per method (median reported).
      timing_support: Support images of the timed tasks.
      tf_recipe: Run the TF-recipe (Flex) peer in the timing section.
      cost_input_size: Resolution of the backward-cost section (paper: 128).
      cost_full_train_batch: FullTrain's batch in the backward-cost section (paper: 100).
      threads: Interpreter (and TF) threads.
      workers: Processes the accuracy and ablation tasks are spread over (the timing section always
        runs alone in this process); results do not depend on it.
      sections: Sections to run (subset of ``SECTIONS``).
      backbones: The paired accuracy section's backbones (every policy, both weight variants, on the
        same tasks); the other sections use ``backbone``/``input_size``/``weights``.
      epochs_grid: Candidate passes over the support set; each policy gets the (learning rate, epochs)
        pair with the best mean validation accuracy (``bench.learning_rates``).
      validation_fraction: Share of each target's images (or classes, see
        ``class_split_min_classes``) in its validation pool (``bench.validation_split``).
      class_split_min_classes: Targets with at least this many classes are cut by class.
      int8_mode: The ``int8`` section's ``ExportConfig.quantize`` (an int8 mode).
      int8_calibration: Its ``ExportConfig.calibration`` ("" = the export's default: the meta-training
        sources of ``build/data_cache_128``; "synthetic:N" in tests).
      procedures: The fine-tuning procedures of the procedure section (``bench.procedures`` names).
      procedure_tasks: Validation tasks per target of the procedure section (>= 20 to decide anything: 5
        per target reversed on the test tasks, issue 39).
      continual_tasks: Test-pool tasks per target of the class-incremental section (``bench.continual_section``).
      continual_epochs: Its passes over each support set; None = the default protocol's
        (``tflite_train.runtime.DEFAULT_PROTOCOL``), a smaller number for a quick run.
    """

    cache_dir: str = "build/data_cache"
    size_caches: tuple[str, ...] = ("build/data_cache_128",)
    out_dir: str = "bench/results"
    model_dir: str = "build/bench/models"
    backbone: str = "mcunet"
    input_size: int = 64
    weights: str | None = "weights/mcunet_64_meta.weights.h5"
    candidate_blocks: int = 7
    train_variants: int = 4
    targets: tuple[str, ...] | None = None
    tasks: int = 20
    seed: int = 1234
    min_ways: int = 5
    max_ways: int = 10
    max_query: int = 10
    max_support_per_class: int = 10
    max_support_total: int = 50
    epochs: int | None = 40
    iterations: int = 40
    learning_rates: tuple[float, ...] = (1e-4, 3e-4, 1e-3, 3e-3)
    tuning_tasks: int = 5
    full_train_batch: int = 1
    memory_budget_mib: float = 1.0
    compute_fraction: float = 0.15
    channel_ratio: float = 0.25
    sparse_update_channel_ratio: float = 0.5
    ablation_target: str | None = None
    ablation_tasks: int = 20
    channel_ratios: tuple[float, ...] = (0.5, 0.25, 0.125)
    timing_runs: int = 3
    timing_support: int = 25
    tf_recipe: bool = True
    cost_input_size: int = 128
    cost_full_train_batch: int = 100
    threads: int = 1
    workers: int = 1
    sections: tuple[str, ...] = DEFAULT_SECTIONS
    backbones: tuple[BackboneRun, ...] = (MCUNET_64, LITE0_128)
    epochs_grid: tuple[int, ...] = (5, 20, 40)
    validation_fraction: float = 0.3
    class_split_min_classes: int = 40
    halving_rounds: tuple[int, ...] = (2,)
    halving_eta: int = 3
    int8_mode: str = "int8-candidates"
    int8_calibration: str = ""
    procedures: tuple[str, ...] = ("previous", "pmf", "pmf_fixed", "pmf_fixed_ties", "pmf_one_rate",
                                   "pmf_fixed_ties_short", "pmf_fixed_ties_batch5", "passes40_lr0.0003",
                                   "passes5_lr0.0003", "passes5_lr0.001", "passes5_lr0.003", "passes5_lr0.01")
    procedure_tasks: int = 20
    continual_tasks: int = 10
    continual_epochs: int | None = None

    def __post_init__(self) -> None:
        runs = tuple(BackboneRun(**b) if isinstance(b, dict) else b for b in self.backbones)
        if not runs or not all(isinstance(b, BackboneRun) for b in runs) or len({b.key for b in runs}) != len(runs):
            raise ValueError(f"backbones must be a non-empty tuple of BackboneRun with distinct keys; got {self.backbones!r}")
        object.__setattr__(self, "backbones", runs)
        grid = tuple(self.epochs_grid)
        if not grid or any(isinstance(e, bool) or not isinstance(e, int) or e < 1 for e in grid) or len(set(grid)) != len(grid):
            raise ValueError(f"epochs_grid must be distinct ints >= 1 (at least one); got {self.epochs_grid!r}")
        object.__setattr__(self, "epochs_grid", grid)
        rounds = tuple(self.halving_rounds)
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in rounds) \
                or any(a >= b for a, b in zip(rounds, rounds[1:])):
            raise ValueError(f"halving_rounds must be increasing ints >= 1; got {self.halving_rounds!r}")
        object.__setattr__(self, "halving_rounds", rounds)
        if isinstance(self.halving_eta, bool) or not isinstance(self.halving_eta, int) or self.halving_eta < 2:
            raise ValueError(f"halving_eta must be an int >= 2; got {self.halving_eta!r}")
        if not isinstance(self.validation_fraction, (int, float)) or not 0 < self.validation_fraction < 1:
            raise ValueError(f"validation_fraction must be in (0, 1); got {self.validation_fraction!r}")
        if isinstance(self.class_split_min_classes, bool) or not isinstance(self.class_split_min_classes, int) \
                or self.class_split_min_classes < 2:
            raise ValueError(f"class_split_min_classes must be an int >= 2; got {self.class_split_min_classes!r}")
        for name in ("input_size", "candidate_blocks", "tasks", "min_ways", "max_ways", "max_query",
                     "max_support_per_class", "max_support_total", "full_train_batch", "ablation_tasks",
                     "timing_runs", "timing_support", "tuning_tasks", "cost_input_size", "cost_full_train_batch", "threads", "workers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int; got {value!r}")
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int) or self.iterations < 0:
            raise ValueError(f"iterations must be an int >= 0; got {self.iterations!r}")
        if isinstance(self.train_variants, bool) or not isinstance(self.train_variants, int) or self.train_variants < 0:
            raise ValueError(f"train_variants must be an int >= 0; got {self.train_variants!r}")
        if self.epochs is not None and (isinstance(self.epochs, bool) or not isinstance(self.epochs, int)
                                        or self.epochs < 1):
            raise ValueError(f"epochs must be None or an int >= 1; got {self.epochs!r}")
        for name in ("tasks", "ablation_tasks"):
            if getattr(self, name) < 2:
                raise ValueError(f"{name} must be >= 2 (a confidence interval needs two); got {getattr(self, name)!r}")
        if self.min_ways > self.max_ways:
            raise ValueError(f"min_ways must be <= max_ways; got {self.min_ways} > {self.max_ways}")
        for name in ("memory_budget_mib", "compute_fraction", "channel_ratio", "sparse_update_channel_ratio"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number; got {value!r}")
        for name in ("channel_ratio", "sparse_update_channel_ratio", "compute_fraction"):
            if getattr(self, name) > 1:
                raise ValueError(f"{name} must be in (0, 1]; got {getattr(self, name)!r}")
        object.__setattr__(self, "size_caches", tuple(self.size_caches))
        if any(not isinstance(d, str) or not d for d in self.size_caches):
            raise ValueError(f"size_caches must be folder names; got {self.size_caches!r}")
        if self.targets is not None:
            object.__setattr__(self, "targets", tuple(self.targets))
            if not self.targets:
                raise ValueError("targets must be None (every cache target) or non-empty")
        ratios = tuple(float(r) for r in self.channel_ratios)
        if not ratios or any(not 0 < r <= 1 for r in ratios):
            raise ValueError(f"channel_ratios must be non-empty, each in (0, 1]; got {self.channel_ratios!r}")
        object.__setattr__(self, "channel_ratios", ratios)
        rates = tuple(float(r) for r in self.learning_rates)
        if not rates or any(not (math.isfinite(r) and r > 0) for r in rates) or len(set(rates)) != len(rates):
            raise ValueError(f"learning_rates must be distinct positive numbers (at least one); got {self.learning_rates!r}")
        object.__setattr__(self, "learning_rates", rates)
        sections = tuple(self.sections)
        unknown = [s for s in sections if s not in SECTIONS]
        if unknown or not sections:
            raise ValueError(f"sections must be a non-empty subset of {SECTIONS}; got {self.sections!r}")
        object.__setattr__(self, "sections", sections)
        from bench.procedures import procedure

        object.__setattr__(self, "procedures", tuple(self.procedures))
        for name in self.procedures:
            procedure(name)  # an unknown name is refused here, before any work
        if not self.procedures or len(set(self.procedures)) != len(self.procedures):
            raise ValueError(f"procedures must be distinct names (at least one); got {self.procedures!r}")
        if isinstance(self.procedure_tasks, bool) or not isinstance(self.procedure_tasks, int) or self.procedure_tasks < 2:
            raise ValueError(f"procedure_tasks must be an int >= 2; got {self.procedure_tasks!r}")
        if isinstance(self.continual_tasks, bool) or not isinstance(self.continual_tasks, int) or self.continual_tasks < 2:
            raise ValueError(f"continual_tasks must be an int >= 2 (a confidence interval needs two); got "
                             f"{self.continual_tasks!r}")
        if self.continual_epochs is not None and (isinstance(self.continual_epochs, bool)
                                                  or not isinstance(self.continual_epochs, int) or self.continual_epochs < 1):
            raise ValueError(f"continual_epochs must be None or an int >= 1; got {self.continual_epochs!r}")
        if not self.int8_mode.startswith("int8"):
            raise ValueError(f"int8_mode must be an int8 mode of ExportConfig.quantize; got {self.int8_mode!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready resolved config."""
        out = dataclasses.asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out

    @property
    def tuning_grid(self) -> tuple[tuple[float, int], ...]:
        """Every (learning rate, epochs) pair the validation tasks try, rate-major."""
        return tuple((lr, e) for lr in self.learning_rates for e in self.epochs_grid)

    @property
    def tuning_schedule(self) -> tuple[int, ...]:
        """Validation tasks per target of each successive-halving round: ``halving_rounds`` below
        ``tuning_tasks``, then ``tuning_tasks``."""
        return tuple(n for n in self.halving_rounds if n < self.tuning_tasks) + (self.tuning_tasks,)


QUICK = dict(tasks=3, tuning_tasks=1, learning_rates=(1e-4, 1e-3), epochs_grid=(3,), ablation_tasks=3,
             timing_runs=1, procedures=("previous", "pmf_fixed_ties_short"), procedure_tasks=2)
"""``--quick``: every section and both backbones at a reduced size that fits about an hour on one
busy core: N = 3 tasks per target, one validation task per target, each policy's learning rate
chosen from 1e-4 and 1e-3 (FullTrain of all 4.6M Lite0 weights wants the lower, the sparse updates
the higher), 3 passes over the support set (epochs not tuned). The report estimates the other
presets' wall time from the per-task costs it measured (``bench.run_cost``)."""

POWERED = dict(backbones=(LITE0_128,), tasks=60, tuning_tasks=5, halving_rounds=(2,), halving_eta=3,
               max_support_total=25, learning_rates=(3e-5, 1e-4, 3e-4, 1e-3, 3e-3),
               sections=("procedure", "accuracy", "backward_cost", "plots"))
"""``--preset powered``: the default backbone only (EfficientNet-Lite0 @ 128, meta-trained), N = 60 test
tasks on every target of the cache (5..10-way, at most 25 support images: the on-device protocol of the
paper's appendix A.2, "all the samples (e.g. 25)", and what ``adapt`` is built for), each training policy's learning rate and passes chosen by
successive halving over the default grid widened downwards ({3e-5, 1e-4, 3e-4, 1e-3, 3e-3} x {5, 20, 40}:
every setting on 2 validation tasks per target, the best third on all 5), every policy at batch 1. 3e-5
was added after round 1 on the default grid put FullTrain's best setting on its lower edge (1e-4 x 40
passes: 68.1 % mean validation accuracy over 8 tasks, 56.6 % at 3e-4 x 5, 15.7 % at 1e-3 x 40; all
4.6M weights at batch 1 want small steps), so that the grid brackets every policy's optimum. The accuracy section
(with its cost figure) and the cost-model tables; timing and ablations can be added to the same
output later with ``--section ... --update``. Resumable: rerunning the same command skips the tasks
already stored under ``<out>/tasks/``."""

PRESETS = {"quick": QUICK, "powered": POWERED}
"""Preset name -> the ``BenchConfig`` fields it sets (other fields: the defaults)."""


def preset_config(name: str | None, **fields: Any) -> BenchConfig:
    """``BenchConfig`` of preset ``name`` (None = the defaults), with ``fields`` overriding it.

    Raises:
      ValueError: an unknown preset name.
    """
    if name is not None and name not in PRESETS:
        raise ValueError(f"unknown bench preset {name!r}; choose one of {sorted(PRESETS)}")
    return BenchConfig(**{**PRESETS.get(name, {}), **fields})


def quick_config(**fields: Any) -> BenchConfig:
    """``BenchConfig`` of the ``QUICK`` preset, with ``fields`` overriding it."""
    return preset_config("quick", **fields)
