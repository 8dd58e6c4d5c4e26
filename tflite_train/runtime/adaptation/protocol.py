"""The adaptation protocol: what ``adapt`` (CLI and Python API), the demo and the benchmark's rows run by
default, defined once.

TinyTrain's on-device protocol (paper appendix A.2: "training using all the samples (e.g. 25) for 40
iterations", i.e. 40 passes over the support set at batch 1, and the 15 % compute budget of §5) is the
starting point; the benchmark's successive halving on validation tasks (``bench/results/BENCHMARKS.md``)
is what confirms or replaces each number here, and ``tests/runtime/adaptation/test_protocol.py`` pins these values to
the committed benchmark's choice for the default backbone once its tuning is stored.
"""

from __future__ import annotations

import dataclasses

__all__ = ["DEFAULT_PROTOCOL", "Protocol"]


@dataclasses.dataclass(frozen=True)
class Protocol:
    """A default adaptation protocol.

    Attributes:
      epochs: Passes over the support set (each support image is seen ``epochs`` times, augmented):
        ``epochs * ceil(N_support / batch_size)`` optimizer steps.
      batch_size: Images per optimizer step.
      compute_fraction: B_compute as a fraction of the full backward pass (FullTrain's backward MACs per
        image; ``tflite_train.sparse.budget``).
      learning_rate: The optimizer's step size; None = the model's own default (metadata
        ``optimizer.learning_rate``, set at export).
      provenance: Where the numbers come from (printed by ``adapt --help`` and the README).
    """

    epochs: int
    batch_size: int
    compute_fraction: float
    learning_rate: float | None
    provenance: str

    def describe(self) -> str:
        """One line for ``--help`` and reports, e.g. "40 passes at batch 1, B_compute 15 % ..."."""
        rate = "the model's learning rate" if self.learning_rate is None else f"learning rate {self.learning_rate:g}"
        return (f"{self.epochs} passes over the support images at batch {self.batch_size}, B_compute "
                f"{self.compute_fraction:.0%} of the full backward pass, {rate} ({self.provenance})")


DEFAULT_PROTOCOL = Protocol(
    epochs=40, batch_size=1, compute_fraction=0.15, learning_rate=3e-3,
    provenance="the powered benchmark's procedure section on the default export (EfficientNet-Lite0 @128, ImageNet "
               "weights), 20 validation tasks on each of 4 targets: 40 passes at 3e-3 scored 72.2 % (+4.0 pp over no "
               "training), 40 passes at 3e-4 71.1 %, the best P>M>F variant 71.2 %; the best procedure that fits "
               "the cost goal (5 passes, 1e-3) scored 70.8 %, more than 1 pp below, so it is not the default; "
               "B_compute from the paper's section 5",
)
"""The protocol ``AdaptConfig``'s defaults, ``adapt`` without flags and the demo use."""
