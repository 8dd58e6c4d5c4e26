package org.tflitetrain.core.select;

import static org.junit.Assert.assertEquals;
import static org.tflitetrain.core.Resources.obj;

import java.util.Map;
import org.junit.Test;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.cost.GoldenCostModelTest;
import org.tflitetrain.core.cost.LayerTable;

/**
 * One B_compute in both languages: a relative compute budget is a fraction of the full backward pass
 * (FullTrain's backward MACs per sample). The golden number comes from Python's
 * {@code Budget(compute_fraction=0.15).compute_limit(table)} (selection_*.json, "compute_budget");
 * tests/sparse/test_budget.py pins the same MCUNet@128 literal on the Python side.
 */
public class ComputeBudgetGoldenTest {
  /** MCUNet at 128x128: FullTrain's backward MACs per sample (Python full_backward_macs). */
  private static final long MCUNET_128_FULL_BACKWARD_MACS = 43_137_536L;

  @Test
  public void paperBudgetIsFifteenPercentOfTheFullBackwardPass() {
    int files = 0;
    for (Map<String, Object> file : GoldenSelectionTest.files()) {
      LayerTable table = GoldenCostModelTest.table(file);
      Map<String, Object> golden = obj(file.get("compute_budget"));
      double fraction = ((Number) golden.get("compute_fraction")).doubleValue();
      long fullBackward = ((Number) golden.get("full_backward_macs")).longValue();
      double limit = ((Number) golden.get("compute_limit_macs")).doubleValue();
      String where = (String) file.get("backbone");
      assertEquals(where, fullBackward, CostModel.fullBackwardMacs(table));
      assertEquals(where, limit, Budget.withFraction(1 << 20, fraction).computeLimit(table), 0.0);
      if (where.equals("mcunet")) {
        assertEquals(MCUNET_128_FULL_BACKWARD_MACS, fullBackward);
        assertEquals(0.15 * MCUNET_128_FULL_BACKWARD_MACS, limit, 0.0);
      }
      files++;
    }
    assertEquals(4, files);
  }

  @Test
  public void fractionOneAdmitsFullTrain() {
    for (Map<String, Object> file : GoldenSelectionTest.files()) {
      LayerTable table = GoldenCostModelTest.table(file);
      assertEquals(CostModel.fullBackwardMacs(table), Budget.withFraction(1, 1.0).computeLimit(table), 0.0);
    }
  }
}
