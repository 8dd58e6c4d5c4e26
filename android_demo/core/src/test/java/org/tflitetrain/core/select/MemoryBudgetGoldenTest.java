package org.tflitetrain.core.select;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.tflitetrain.core.Resources.obj;

import java.util.Map;
import org.junit.Test;
import org.tflitetrain.core.cost.GoldenCostModelTest;
import org.tflitetrain.core.cost.LayerTable;

/**
 * One B_mem in both languages: the default budget is the paper's 1 MiB for MCUNet@128 scaled by the model's
 * LastLayer backward memory. The golden numbers come from Python's {@code scaled_memory_budget(table)}
 * (selection_*.json, "memory_budget"); tests/sparse/test_budget.py pins the same literals on the Python side.
 */
public class MemoryBudgetGoldenTest {
  @Test
  public void scaledMemoryBudgetEqualsPythonsForEveryBackbone() {
    int files = 0;
    for (Map<String, Object> file : GoldenSelectionTest.files()) {
      LayerTable table = GoldenCostModelTest.table(file);
      Map<String, Object> golden = obj(file.get("memory_budget"));
      String where = (String) file.get("backbone");
      assertEquals(where, Budget.PAPER_MEMORY_BYTES, ((Number) golden.get("reference_bytes")).doubleValue(), 0.0);
      assertEquals(where, Budget.REFERENCE_LAST_LAYER_BYTES,
          ((Number) golden.get("reference_last_layer_bytes")).longValue());
      assertEquals(where, ((Number) golden.get("last_layer_bytes")).longValue(), Budget.lastLayerMemory(table));
      assertEquals(where, ((Number) golden.get("memory_limit_bytes")).doubleValue(),
          Budget.scaledMemoryBytes(table), 0.0);
      if (where.equals("mcunet")) {  // the reference model: exactly the paper's 1 MiB
        assertEquals(2_132_480L, Budget.lastLayerMemory(table));
        assertEquals(1 << 20, Budget.scaledMemoryBytes(table), 0.0);
      }
      files++;
    }
    assertEquals(4, files);
  }

  @Test
  public void scalesLinearlyAndRefusesNegativeReferences() {
    LayerTable table = GoldenCostModelTest.table(GoldenSelectionTest.files().get(0));
    assertEquals(2 * Budget.scaledMemoryBytes(table), Budget.scaledMemoryBytes(table, 2.0 * (1 << 20)), 1e-6);
    assertThrows(IllegalArgumentException.class, () -> Budget.scaledMemoryBytes(table, -1.0));
    assertThrows(IllegalArgumentException.class, () -> Budget.scaledMemoryBytes(table, Double.NaN));
  }
}
