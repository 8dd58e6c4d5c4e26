"""The resolved configuration of one trainable export (plain data, written beside every output)."""

from __future__ import annotations

import dataclasses
from typing import Any

OPTIMIZERS = ("adam", "sgd_momentum")


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    """Everything that determines an exported ``.tflite`` file besides the backbone weights.

    Attributes:
      backbone: Backbone name (``tflite_train.architectures.BACKBONES``).
      input_size: Input height and width (H, W).
      in_channels: Image channels C.
      candidate_blocks: k: the layers of the last k blocks (plus the final conv) are candidates;
        k = num_blocks also makes the stem a candidate (FullTrain).
      class_capacity: K_max, the most classes the head holds.
      optimizer: ``"adam"`` or ``"sgd_momentum"``.
      learning_rate: Initial learning rate (the ``learning_rate`` variable; ``set_hparams`` changes it).
      beta1, beta2, epsilon: Adam constants.
      momentum: SGD momentum constant.
      cosine_scale: s in logits = s * cos(embedding, prototype).
      mean, std: Per-channel normalisation applied in-graph to images given in [0, 1].
      seed: Seed of the backbone initialisers when no weights are given, and of the self-test inputs.
      weights: Path of Keras weights that were loaded (informational), or None.
      selftest_batch: Number of images in the embedded self-test.
      train_variants: Number of depth-specific ``train_step_<layer>`` signatures, cut at the first
        layer of each of the last ``train_variants`` candidate blocks (0: only ``train_step``).
    """

    backbone: str = "tiny"
    input_size: tuple[int, int] = (33, 33)
    in_channels: int = 3
    candidate_blocks: int = 2
    class_capacity: int = 64
    optimizer: str = "adam"
    learning_rate: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-7
    momentum: float = 0.9
    cosine_scale: float = 10.0
    mean: tuple[float, ...] = (0.5, 0.5, 0.5)
    std: tuple[float, ...] = (0.5, 0.5, 0.5)
    seed: int = 0
    weights: str | None = None
    selftest_batch: int = 3
    train_variants: int = 4

    def __post_init__(self) -> None:
        size = self.input_size
        if isinstance(size, int):
            size = (size, size)
        object.__setattr__(self, "input_size", tuple(int(v) for v in size))
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}; got {self.optimizer!r}")
        if not isinstance(self.class_capacity, int) or self.class_capacity < 2:
            raise ValueError(f"class_capacity must be an int >= 2; got {self.class_capacity!r}")
        if not isinstance(self.candidate_blocks, int) or self.candidate_blocks < 1:
            raise ValueError(f"candidate_blocks must be a positive int; got {self.candidate_blocks!r}")
        mean = tuple(float(v) for v in self.mean)
        std = tuple(float(v) for v in self.std)
        if len(mean) == 1:
            mean = mean * self.in_channels
        if len(std) == 1:
            std = std * self.in_channels
        if len(mean) != self.in_channels or len(std) != self.in_channels:
            raise ValueError(f"mean/std need {self.in_channels} values; got {self.mean!r} / {self.std!r}")
        if min(std) <= 0:
            raise ValueError(f"std must be positive; got {self.std!r}")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "std", std)
        if not isinstance(self.train_variants, int) or self.train_variants < 0:
            raise ValueError(f"train_variants must be an int >= 0; got {self.train_variants!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive; got {self.learning_rate!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        out = dataclasses.asdict(self)
        out["input_size"] = list(self.input_size)
        out["mean"] = list(self.mean)
        out["std"] = list(self.std)
        return out
