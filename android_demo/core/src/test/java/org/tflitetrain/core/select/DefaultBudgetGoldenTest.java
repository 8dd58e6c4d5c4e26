package org.tflitetrain.core.select;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.tflitetrain.core.Resources.list;
import static org.tflitetrain.core.Resources.obj;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tflitetrain.core.cost.GoldenCostModelTest;
import org.tflitetrain.core.cost.LayerTable;
import org.tflitetrain.core.cost.Optimizer;
import org.tflitetrain.core.json.Json;

/**
 * One default budget in both languages: the paper's scaled B_mem and 15 % B_compute, raised on a small model
 * just enough to admit one candidate layer. The golden budgets and admitted layers come from Python's
 * {@code admitting_budget} / {@code admitting_layer} (selection_*.json, "default_budget": per candidate set,
 * channel ratio, optimizer, batch size and which bounds may be raised).
 */
public class DefaultBudgetGoldenTest {
  private static Budget budget(Object value) {
    Map<String, Object> b = obj(value);
    Object memory = b.get("memory_bytes");
    Object macs = b.get("compute_macs");
    Object fraction = b.get("compute_fraction");
    return new Budget(memory == Json.NULL ? Double.POSITIVE_INFINITY : ((Number) memory).doubleValue(),
        macs == Json.NULL ? null : ((Number) macs).doubleValue(),
        fraction == Json.NULL ? null : ((Number) fraction).doubleValue());
  }

  @Test
  public void defaultBudgetsEqualPythonsForEveryBackbone() {
    int cases = 0;
    int raised = 0;
    for (Map<String, Object> file : GoldenSelectionTest.files()) {
      LayerTable table = GoldenCostModelTest.table(file);
      for (Object item : list(file.get("default_budget"))) {
        Map<String, Object> c = obj(item);
        List<String> candidates = new ArrayList<>();
        list(c.get("candidates")).forEach(x -> candidates.add((String) x));
        double ratio = ((Number) c.get("channel_ratio")).doubleValue();
        Optimizer optimizer = Optimizer.fromName((String) c.get("optimizer"));
        int batch = ((Number) c.get("batch_size")).intValue();
        boolean raiseMemory = (Boolean) c.get("raise_memory");
        boolean raiseCompute = (Boolean) c.get("raise_compute");
        String where = file.get("backbone") + " " + c.get("set") + " " + ratio + " " + optimizer + " " + batch + " "
            + raiseMemory + " " + raiseCompute;
        Budget paper = budget(c.get("paper"));
        assertEquals(where, new Budget(Budget.scaledMemoryBytes(table), null, 0.15), paper);
        Budget expected = budget(c.get("budget"));
        assertEquals(where, expected, paper.admitting(table, candidates, ratio, optimizer, batch, raiseMemory,
            raiseCompute));
        int admitted = paper.admittingLayer(table, candidates, ratio, optimizer, batch, raiseMemory, raiseCompute);
        Object name = c.get("admitted");
        assertEquals(where, name == Json.NULL ? -1 : table.indexOf((String) name), admitted);
        if (raiseMemory && raiseCompute) {
          assertEquals(where, expected, Budget.defaultBudget(table, candidates, 0.15, ratio, optimizer, batch));
        }
        if (!expected.equals(paper)) {
          raised++;
        }
        cases++;
      }
    }
    assertTrue("some golden case must raise the budget", raised > 0);
    assertEquals(4 * 4 * 4 * 3, cases);
  }
}
