"""Reference figures from the TinyTrain paper (ICML 2024), as data, for side-by-side reports.

Memory is in the paper's "MB", which its numbers show to be MiB (2^20 bytes): e.g. LastLayer's
updated weights for MCUNet, 0.35 MB, are the 92,160 weights of the last conv x 4 bytes.
Compute is backward-pass MACs per sample.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ArchitectureFigures:
    """Table 5: parameters (conv weights), forward MACs at 128x128, layers, blocks."""

    params: float
    macs: float
    layers: int
    blocks: int


ARCHITECTURES: dict[str, ArchitectureFigures] = {
    "mcunet": ArchitectureFigures(0.463e6, 22.45e6, 42, 14),
    "mbv2": ArchitectureFigures(0.289e6, 17.45e6, 52, 17),
    "proxyless": ArchitectureFigures(0.358e6, 19.21e6, 61, 20),
}


@dataclasses.dataclass(frozen=True)
class BackwardFigures:
    """Table 2 (total memory, compute) and Table 6 (memory breakdown, MCUNet only; MiB)."""

    total_mib: float
    macs: float
    weights_mib: float | None = None
    optimizer_mib: float | None = None
    activation_mib: float | None = None


# Table 2 (Adam) and Table 6 (Adam / SGD breakdown) for MCUNet at 128x128.
MCUNET_BACKWARD_ADAM: dict[str, BackwardFigures] = {
    "FullTrain": BackwardFigures(906.0, 44.9e6),
    "LastLayer": BackwardFigures(2.03, 1.57e6, 0.35, 1.05, 0.63),
    "TinyTL": BackwardFigures(542.0, 26.4e6),
    "SparseUpdate": BackwardFigures(1.43, 11.9e6, 0.20, 0.60, 0.63),
    "TinyTrain": BackwardFigures(0.89, 6.51e6, 0.07, 0.20, 0.63),
}
MCUNET_BACKWARD_SGD: dict[str, BackwardFigures] = {
    "LastLayer": BackwardFigures(1.33, 1.57e6, 0.35, 0.35, 0.63),
    "SparseUpdate": BackwardFigures(1.03, 11.9e6, 0.20, 0.20, 0.63),
    "TinyTrain": BackwardFigures(0.76, 6.51e6, 0.07, 0.07, 0.63),
}
BACKWARD_ADAM: dict[str, dict[str, BackwardFigures]] = {
    "mcunet": MCUNET_BACKWARD_ADAM,
    "mbv2": {
        "FullTrain": BackwardFigures(1049.0, 34.9e6),
        "LastLayer": BackwardFigures(1.64, 0.80e6),
        "TinyTL": BackwardFigures(587.0, 16.4e6),
        "SparseUpdate": BackwardFigures(2.08, 8.10e6),
        "TinyTrain": BackwardFigures(1.06, 4.90e6),
    },
    "proxyless": {
        "FullTrain": BackwardFigures(857.0, 38.4e6),
        "LastLayer": BackwardFigures(1.06, 0.59e6),
        "TinyTL": BackwardFigures(541.0, 17.8e6),
        "SparseUpdate": BackwardFigures(1.74, 7.60e6),
        "TinyTrain": BackwardFigures(0.78, 5.00e6),
    },
}


# Table 1: average top-1 accuracy (%) over the nine Meta-Dataset cross-domain targets, MCUNet.
MCUNET_ACCURACY_AVERAGE: dict[str, float] = {
    "None": 44.5, "FullTrain": 66.9, "LastLayer": 54.6, "TinyTL": 66.1, "SparseUpdate": 64.3, "TinyTrain": 69.3,
}

# Table 8 (appendix, Pi Zero 2, MCUNet): seconds of Fisher calculation + selection, run time, total.
MCUNET_LATENCY_PI_ZERO2: dict[str, tuple[float, float, float]] = {
    "SparseUpdate": (0.0, 607.0, 607.0),
    "TinyTrain": (18.7, 526.0, 544.0),
}
