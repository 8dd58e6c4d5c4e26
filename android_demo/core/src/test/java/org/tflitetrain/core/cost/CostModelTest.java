package org.tflitetrain.core.cost;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;

import java.util.List;
import java.util.Map;
import org.junit.Test;

/** The hand-computed three-layer net of tests/sparse/test_cost_model.py, plus input validation. */
public class CostModelTest {
  static LayerTable threeLayer() {
    return new LayerTable(List.of(
        new LayerSpec(0, "conv", -1, "stem", 3, 2, 2, 4, 1, new int[] {8, 8}, new int[] {4, 4}, "relu6"),
        new LayerSpec(1, "dw", 0, "depthwise", 3, 1, 4, 4, 4, new int[] {4, 4}, new int[] {4, 4}, "relu6"),
        new LayerSpec(2, "pw", 0, "project", 1, 1, 4, 3, 1, new int[] {4, 4}, new int[] {4, 4}, "linear")));
  }

  @Test
  public void layerCostsByHand() {
    LayerTable t = threeLayer();
    LayerCost c0 = CostModel.layerCost(t.get(0));
    assertEquals(72, c0.weights);
    assertEquals(1152, c0.forwardMacs);
    assertEquals(128, c0.inActivation);
    assertEquals(64, c0.outActivation);
    assertEquals(40, CostModel.layerCost(t.get(1)).params());
    assertEquals(120, CostModel.totalWeights(t));
    assertEquals(1920, CostModel.totalForwardMacs(t));
  }

  @Test
  public void depthwiseSavesOnlySelectedInputChannels() {
    // dw with K=2: B1 = 2*(9+1)=20 floats; saved inputs 4*4*2=32 floats; masks dw+... relu6 outs from dw: 64 bits.
    BackwardCost c = CostModel.backwardCostByName(threeLayer(), Map.of("dw", 2), Optimizer.SGD, 1, false);
    assertEquals(20, c.updatedParams);
    assertEquals(0, c.optimizerBytes);
    assertEquals(128, c.savedInputBytes);
    assertEquals(8, c.reluMaskBytes);
    assertEquals(Math.max(192 * 4, 128 + 8), c.activationBytes);
    assertEquals(192, c.inputGradMacs);
    assertEquals(16 * 9 * 2, c.weightGradMacs);
    assertEquals(Integer.valueOf(1), c.deepestLayer);
  }

  @Test
  public void emptySelectionCostsNothing() {
    BackwardCost c = CostModel.backwardCost(threeLayer(), Map.of(), Optimizer.ADAM, 4, true);
    assertEquals(0, c.totalBytes());
    assertEquals(null, c.deepestLayer);
  }

  @Test
  public void rejectsBadInputs() {
    LayerTable t = threeLayer();
    assertThrows(IllegalArgumentException.class, () -> CostModel.backwardCostByName(t, Map.of("nope", 1), Optimizer.SGD, 1, true));
    assertThrows(IllegalArgumentException.class, () -> CostModel.backwardCostByName(t, Map.of("pw", 4), Optimizer.SGD, 1, true));
    assertThrows(IllegalArgumentException.class, () -> CostModel.backwardCostByName(t, Map.of("pw", 0), Optimizer.SGD, 1, true));
    assertThrows(IllegalArgumentException.class, () -> CostModel.backwardCostByName(t, Map.of("pw", 1), Optimizer.SGD, 0, true));
    assertThrows(IllegalArgumentException.class, () -> CostModel.channelCount(8, 0.0));
    assertThrows(IllegalArgumentException.class, () -> CostModel.channelCount(8, 1.5));
    assertThrows(IllegalArgumentException.class, () -> CostModel.channelCount(8, Double.NaN));
    assertThrows(IllegalArgumentException.class, () -> Optimizer.fromName("rmsprop"));
    assertThrows(IllegalArgumentException.class, () -> new LayerSpec(0, "x", 0, "bogus", 1, 1, 1, 1, 1,
        new int[] {1, 1}, new int[] {1, 1}, "relu6"));
  }

  @Test
  public void channelCountRoundsUpWithTolerance() {
    assertEquals(1, CostModel.channelCount(8, 0.01));
    assertEquals(3, CostModel.channelCount(9, 1.0 / 3));
    assertEquals(48, CostModel.channelCount(96, 0.5));
  }
}
