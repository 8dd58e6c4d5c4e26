"""The resolved configuration of one trainable export (plain data, written beside every output)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tflite_train import contract as C

__all__ = ["OPTIMIZERS", "QUANTIZE_MODES", "DEFAULT_BACKBONE", "DEFAULT_INPUT_SIZE", "DEFAULT_CANDIDATE_BLOCKS", "ExportConfig"]

OPTIMIZERS = ("adam", "sgd_momentum")
QUANTIZE_MODES = ("", "int8", "int8-weights", "int8-candidates")
"""``ExportConfig.quantize``: "" = float32 everywhere; "int8" = int8 where nothing trains (``docs/int8.md``);
"int8-weights" = every kernel stored int8 (per-channel), all arithmetic float32; "int8-candidates" = only the
candidate layers' kernels stored int8, all arithmetic float32 (Lite0 @128: the best accuracy of the three)."""

DEFAULT_BACKBONE = "lite0"
"""What ``export`` builds when given no backbone, weights or Keras model: EfficientNet-Lite0 at
``DEFAULT_INPUT_SIZE`` with the weights ``tflite_train.default_weights`` ships (``weights_spec.resolve_export_config``)."""
DEFAULT_INPUT_SIZE = 128
DEFAULT_CANDIDATE_BLOCKS = {"lite0": 6}
"""Trailing blocks the device may update, per built-in backbone (others: 4). Lite0: the last 6 blocks
(b10..b15, 8x8 and 4x4 maps at 128 px) plus the head conv: the blocks meta-training adapted; their
backward pass stays within a Pi's memory (the selection's budget decides what is updated)."""
_OMIT_AT_DEFAULT = "omit_at_default"
"""Dataclass field metadata key: ``to_dict`` leaves the field out while it holds its default (fields added
after exports were cached, whose config dicts -- and so their metadata and cache keys -- must not change)."""


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    """Everything that determines an exported ``.tflite`` file besides the backbone weights.

    Attributes:
      backbone: Built-in backbone name (``tflite_train.architectures.BACKBONES``), or ``"keras"`` for
        a user's Keras model (given to ``export_keras``).
      input_size: Input height and width (H, W); None = the Keras model's own (built-ins need one).
      in_channels: Image channels C of a built-in backbone (a Keras model brings its own).
      candidate_blocks: Shorthand for ``candidates = "blocks:k"`` when ``candidates`` is empty: the
        layers of the last k blocks (plus the trailing layers) are candidates; k = num_blocks also
        makes the stem a candidate (FullTrain).
      candidates: Candidate layers (``converters.graph.region``): "blocks:K", "layers:K",
        "from:LAYER" or "all"; "" = "blocks:{candidate_blocks}"; "auto" = the default choice of
        ``converters.candidate_choice`` (what ``export --keras-model`` uses without ``--candidates``),
        replaced by the spec chosen in the exported file's config.
      feature_layer: Layer whose output is the embedding; None = the global pooling (or Flatten)
        that feeds the model's classifier (``converters.graph.passes.select_embedding``).
      class_capacity: K_max, the most classes the head holds.
      optimizer: ``"adam"`` or ``"sgd_momentum"``.
      learning_rate: Initial learning rate (the ``learning_rate`` variable; ``set_hparams`` changes it).
      beta1, beta2, epsilon: Adam constants.
      momentum: SGD momentum constant.
      cosine_scale: s in logits = s * cos(embedding, prototype).
      mean, std: Per-channel normalisation (x - mean) / std applied in-graph; None = from the Keras
        model's input Rescaling/Normalization layers, or the identity when it has none.
      input_range: (low, high) of the pixels the device feeds; None = (0, 255) when the model's
        preprocessing layers were absorbed, else (0, 1).
      channel_order: The channel order the network reads: ``contract.CHANNEL_ORDER_RGB`` (the images as
        fed) or ``CHANNEL_ORDER_BGR`` (the graph reverses the channels of the RGB images the device
        feeds, before the normalisation; ``mean`` and ``std`` are then in BGR order). Left out of
        ``to_dict`` at its default, so configs that do not use it serialise as before it existed.
      seed: Seed of the backbone initialisers when no weights are given, and of the self-test inputs.
      weights: Path of Keras weights that were loaded (informational), or None.
      keras_model: Path of the user's ``.keras`` / ``.h5`` model (informational), or None.
      selftest_batch: Number of images in the embedded self-test.
      train_variants: Number of depth-specific ``train_step_<layer>`` signatures, cut at the first
        layer of each of the last ``train_variants`` candidate blocks (0: only ``train_step``).
      cache_signatures: Add the cached-cut signatures (``features_<layer>``,
        ``train_step_from_<layer>``, ``infer_from_<layer>``) for the ``cache_cuts`` cuts whose frontier
        is one tensor (``converters.cached_cut``); such a cut gets
        no ``train_step_<layer>`` (features + train_step_from compute it). False writes a file without
        them (as older exports: a ``train_step_<layer>`` per cut), which the runtime adapts with full steps.
      episode_signatures: With the cache signatures, also add per cached cut ``episode_step_from_<layer>``
        (one step on the episode loss with prototypes computed in the graph from the support rows,
        ``converters.cosine_head``) and ``accumulate_from_<layer>``, and once ``apply_accumulated``
        (``converters.gradient_accumulation``). Off by default (``--episode-signatures`` turns it on): on
        the default Lite0@128 export they add 11 % to the file, 85 % to the export time and 120 MiB to
        LiteRT's peak memory (issue 39's measurement), and the procedure that would use them is not yet the
        default. False writes a file without them (as older exports). Left out of ``to_dict`` at its default.
      cache_cuts: Cuts with cache signatures (``converters.cut_choice``). None: the lowest candidate and
        the block cuts that a selection within the default adaptation protocol's compute budget can start
        from. An int N: the lowest candidate and the first layer of each of the highest N - 1 candidate
        blocks (each candidate layer when there are no blocks).
      quantize: "" (float32), "int8": the frozen prefix runs as int8 kernels (``converters.int8_prefix``)
        and the candidate kernels are stored int8 with per-channel scales, dequantized into the float32
        variables (``converters.int8_weights``); "int8-weights": the prefix's kernels are stored int8 too
        and every activation stays float32; "int8-candidates": only the candidate kernels are stored int8,
        all arithmetic float32. Left out of ``to_dict`` at its default.
      calibration: Images that calibrate the int8 prefix (``converters.calibration_images``): "" = the
        data cache's meta-training sources, "synthetic:N" = N seeded random images (tests), else an image
        folder. Left out of ``to_dict`` at its default.
      model_output: For a Keras model with several outputs, the one (by its layer name) whose path holds the
        embedding: its classifier is dropped, the other outputs are not exported. None: the model's only
        output (a model with several is refused, naming them, unless ``feature_layer`` is given). Left out
        of ``to_dict`` at its default.
    """

    backbone: str = "tiny"
    input_size: tuple[int, int] | None = (33, 33)
    in_channels: int = 3
    candidate_blocks: int = 2
    candidates: str = ""
    feature_layer: str | None = None
    class_capacity: int = 64
    optimizer: str = "adam"
    learning_rate: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-7
    momentum: float = 0.9
    cosine_scale: float = 10.0
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    input_range: tuple[float, float] | None = None
    channel_order: str = dataclasses.field(default=C.CHANNEL_ORDER_RGB, metadata={_OMIT_AT_DEFAULT: True})
    seed: int = 0
    weights: str | None = None
    keras_model: str | None = None
    selftest_batch: int = 3
    train_variants: int = 4
    cache_signatures: bool = True
    episode_signatures: bool = dataclasses.field(default=False, metadata={_OMIT_AT_DEFAULT: True})
    cache_cuts: int | None = None
    quantize: str = dataclasses.field(default="", metadata={_OMIT_AT_DEFAULT: True})
    calibration: str = dataclasses.field(default="", metadata={_OMIT_AT_DEFAULT: True})
    model_output: str | None = dataclasses.field(default=None, metadata={_OMIT_AT_DEFAULT: True})

    def __post_init__(self) -> None:
        size = self.input_size
        if isinstance(size, int):
            size = (size, size)
        if size is not None:
            object.__setattr__(self, "input_size", tuple(int(v) for v in size))
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}; got {self.optimizer!r}")
        if not isinstance(self.class_capacity, int) or self.class_capacity < 2:
            raise ValueError(f"class_capacity must be an int >= 2; got {self.class_capacity!r}")
        if not isinstance(self.candidate_blocks, int) or self.candidate_blocks < 1:
            raise ValueError(f"candidate_blocks must be a positive int; got {self.candidate_blocks!r}")
        if (self.mean is None) != (self.std is None):
            raise ValueError("mean and std must be given together (or both None)")
        if self.mean is not None:
            mean = tuple(float(v) for v in self.mean)
            std = tuple(float(v) for v in self.std)
            if not all(math.isfinite(v) for v in mean):
                raise ValueError(f"mean must be finite; got {self.mean!r}")
            if not all(math.isfinite(v) and v > 0 for v in std):
                raise ValueError(f"std must be finite and positive; got {self.std!r}")
            object.__setattr__(self, "mean", mean)
            object.__setattr__(self, "std", std)
        if self.input_range is not None:
            low, high = (float(v) for v in self.input_range)
            if not low < high:
                raise ValueError(f"input_range must be (low, high) with low < high; got {self.input_range!r}")
            object.__setattr__(self, "input_range", (low, high))
        if self.channel_order not in C.CHANNEL_ORDERS:
            raise ValueError(f"channel_order must be one of {C.CHANNEL_ORDERS}; got {self.channel_order!r}")
        if not isinstance(self.candidates, str):
            raise ValueError(f"candidates must be a string; got {self.candidates!r}")
        if not isinstance(self.train_variants, int) or self.train_variants < 0:
            raise ValueError(f"train_variants must be an int >= 0; got {self.train_variants!r}")
        if self.cache_cuts is not None and (isinstance(self.cache_cuts, bool) or not isinstance(self.cache_cuts, int)
                                            or self.cache_cuts < 1):
            raise ValueError(f"cache_cuts must be None or an int >= 1; got {self.cache_cuts!r}")
        if not isinstance(self.cache_signatures, bool):
            raise ValueError(f"cache_signatures must be a bool; got {self.cache_signatures!r}")
        if not isinstance(self.episode_signatures, bool):
            raise ValueError(f"episode_signatures must be a bool; got {self.episode_signatures!r}")
        if self.quantize not in QUANTIZE_MODES:
            raise ValueError(f"quantize must be one of {QUANTIZE_MODES}; got {self.quantize!r}")
        if not 0 < self.learning_rate < math.inf:
            raise ValueError(f"learning_rate must be finite and positive; got {self.learning_rate!r}")

    @property
    def candidate_spec(self) -> str:
        """The candidate spec: ``candidates``, or "blocks:{candidate_blocks}" when it is empty."""
        return self.candidates or f"blocks:{self.candidate_blocks}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (fields marked omit-at-default left out while at their default)."""
        out = dataclasses.asdict(self)
        for key in ("input_size", "mean", "std", "input_range"):
            out[key] = None if getattr(self, key) is None else list(getattr(self, key))
        for field in dataclasses.fields(self):
            if field.metadata.get(_OMIT_AT_DEFAULT) and getattr(self, field.name) == field.default:
                del out[field.name]
        return out
