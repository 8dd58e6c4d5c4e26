"""Hand-made layer tables shared by the selection tests.

``abc_table`` -- three 1x1 convs on a 2x2 map (D = 4 positions), all stride 1:

    a: stem     2 -> 4, relu6   |W| =  8, M = 4*8  = 32, in  8, out 16 activations
    b: expand   4 -> 4, relu6   |W| = 16, M = 4*16 = 64, in 16, out 16
    c: project  4 -> 2, linear  |W| =  8, M = 4*8  = 32, in 16, out  8

Total forward MACs = 128. Inference peak = max(8+16, 16+16, 16+8) = 32 floats = 128 B.
Costs below use optimizer="sgd", gradient_buffer=False (so memory = 4 B * updated params +
activation bytes), batch 1. Channel ratio 0.5 gives K_a = 2, K_b = 2, K_c = 1.
"""

import pytest

from tflite_train.sparse import LayerSpec, LayerTable


@pytest.fixture
def abc_table() -> LayerTable:
    return LayerTable((
        LayerSpec(0, "a", -1, "stem", 1, 1, 2, 4, 1, (2, 2), (2, 2), "relu6"),
        LayerSpec(1, "b", 0, "expand", 1, 1, 4, 4, 1, (2, 2), (2, 2), "relu6"),
        LayerSpec(2, "c", 0, "project", 1, 1, 4, 2, 1, (2, 2), (2, 2), "linear"),
    ))


@pytest.fixture
def strided_table() -> LayerTable:
    # s0: 3x3 conv 1->2, 4x4 -> 4x4: |W| = 9*1*2 = 18, M = 16*18 = 288
    # s1: 1x1 conv 2->4 stride 2, 4x4 -> 2x2: |W| = 8, M = 4*8 = 32
    # s2: 1x1 conv 4->9, 2x2: |W| = 36, M = 4*36 = 144
    # max |W| = 36, max M = 288.
    return LayerTable((
        LayerSpec(0, "s0", -1, "stem", 3, 1, 1, 2, 1, (4, 4), (4, 4), "relu6"),
        LayerSpec(1, "s1", 0, "expand", 1, 2, 2, 4, 1, (4, 4), (2, 2), "relu6"),
        LayerSpec(2, "s2", 0, "project", 1, 1, 4, 9, 1, (2, 2), (2, 2), "linear"),
    ))
