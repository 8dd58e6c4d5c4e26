package org.tflitetrain.core.cost;

import static org.tflitetrain.core.Resources.list;
import static org.tflitetrain.core.Resources.obj;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tflitetrain.core.Resources;
import org.tflitetrain.core.json.Json;

/** Every number of the Python cost model's golden vectors, recomputed in Java. */
public class GoldenCostModelTest {
  private static long num(Object o) {
    return (Long) o;
  }

  private static List<Map<String, Object>> files() {
    List<Map<String, Object>> out = new ArrayList<>();
    Map<String, Object> index = obj(Json.parse(Resources.text("/golden/index.json")));
    assertEquals(1L, index.get("vectors_version"));
    for (Object name : list(index.get("cost_files"))) {
      out.add(obj(Json.parse(Resources.text("/golden/" + name))));
    }
    assertEquals("golden cost files", 9, out.size());
    return out;
  }

  public static LayerTable table(Map<String, Object> file) {
    List<LayerSpec> layers = new ArrayList<>();
    for (Object entry : list(file.get("layers"))) {
      Map<String, Object> l = obj(entry);
      List<Object> in = list(l.get("in_hw"));
      List<Object> out = list(l.get("out_hw"));
      layers.add(new LayerSpec((int) num(l.get("index")), (String) l.get("name"), (int) num(l.get("block")),
          (String) l.get("role"), (int) num(l.get("kernel")), (int) num(l.get("stride")),
          (int) num(l.get("in_channels")), (int) num(l.get("out_channels")), (int) num(l.get("groups")),
          new int[] {(int) num(in.get(0)), (int) num(in.get(1))}, new int[] {(int) num(out.get(0)), (int) num(out.get(1))},
          (String) l.get("activation")));
    }
    return new LayerTable(layers);
  }

  private static String where(Map<String, Object> file) {
    return file.get("backbone") + "@" + file.get("input_size");
  }

  @Test
  public void layerCostsMatch() {
    int checked = 0;
    for (Map<String, Object> file : files()) {
      LayerTable table = table(file);
      List<Object> costs = list(file.get("layer_costs"));
      assertEquals(where(file), costs.size(), table.size());
      for (int i = 0; i < table.size(); i++) {
        Map<String, Object> e = obj(costs.get(i));
        LayerCost c = CostModel.layerCost(table.get(i));
        String at = where(file) + " " + c.name;
        assertEquals(at, e.get("name"), c.name);
        assertEquals(at, num(e.get("weights")), c.weights);
        assertEquals(at, num(e.get("biases")), c.biases);
        assertEquals(at, num(e.get("forward_macs")), c.forwardMacs);
        assertEquals(at, num(e.get("input_grad_macs")), c.inputGradMacs);
        assertEquals(at, num(e.get("weight_grad_macs")), c.weightGradMacs);
        assertEquals(at, num(e.get("in_activation")), c.inActivation);
        assertEquals(at, num(e.get("out_activation")), c.outActivation);
        assertEquals(at, num(e.get("params")), c.params());
        checked++;
      }
      assertEquals(where(file), num(file.get("total_forward_macs")), CostModel.totalForwardMacs(table));
      assertEquals(where(file), num(file.get("total_weights")), CostModel.totalWeights(table));
    }
    assertTrue(checked > 100);
  }

  @Test
  public void blocksMatch() {
    for (Map<String, Object> file : files()) {
      LayerTable table = table(file);
      assertTrue(table.numBlocks() >= 4);
      assertEquals(table.size() - 1, (int) table.lastBlocks(1).get(table.lastBlocks(1).size() - 1));
    }
  }

  @Test
  public void weightGradMacsAndChannelCountsMatch() {
    for (Map<String, Object> file : files()) {
      LayerTable table = table(file);
      for (Object entry : list(file.get("weight_grad_macs"))) {
        Map<String, Object> e = obj(entry);
        assertEquals(where(file) + " " + e, num(e.get("macs")),
            CostModel.weightGradMacs(table.get((String) e.get("layer")), (int) num(e.get("channels"))));
      }
      for (Object entry : list(file.get("channel_count"))) {
        Map<String, Object> e = obj(entry);
        double ratio = e.get("ratio") instanceof Long ? (Long) e.get("ratio") : (Double) e.get("ratio");
        assertEquals(where(file) + " " + e, num(e.get("count")),
            CostModel.channelCount((int) num(e.get("out_channels")), ratio));
      }
    }
  }

  @Test
  public void unfusedActivationBytesMatch() {
    for (Map<String, Object> file : files()) {
      LayerTable table = table(file);
      for (Object entry : list(file.get("unfused_activation_bytes"))) {
        Map<String, Object> e = obj(entry);
        assertEquals(where(file), num(e.get("bytes")),
            CostModel.unfusedActivationBytes(table, (int) num(e.get("batch_size"))));
      }
    }
  }

  @Test
  public void optimizerSlotsMatch() {
    for (Map<String, Object> file : files()) {
      Map<String, Object> slots = obj(file.get("optimizer_slots"));
      assertEquals(Optimizer.values().length, slots.size());
      for (Optimizer o : Optimizer.values()) {
        assertEquals(num(slots.get(o.wireName)), o.slots);
      }
    }
  }

  @Test
  public void backwardCostsMatch() {
    int cases = 0;
    for (Map<String, Object> file : files()) {
      LayerTable table = table(file);
      for (Object entry : list(file.get("backward_cost"))) {
        Map<String, Object> e = obj(entry);
        Map<String, Integer> channels = new LinkedHashMap<>();
        obj(e.get("channels")).forEach((k, v) -> channels.put(k, (int) num(v)));
        BackwardCost c = CostModel.backwardCostByName(table, channels, Optimizer.fromName((String) e.get("optimizer")),
            (int) num(e.get("batch_size")), (Boolean) e.get("gradient_buffer"));
        Map<String, Object> x = obj(e.get("expected"));
        String at = where(file) + " " + e.get("label") + " " + e.get("optimizer") + " b=" + e.get("batch_size")
            + " gb=" + e.get("gradient_buffer");
        assertEquals(at, num(x.get("updated_params")), c.updatedParams);
        assertEquals(at, num(x.get("updated_weight_bytes")), c.updatedWeightBytes);
        assertEquals(at, num(x.get("optimizer_bytes")), c.optimizerBytes);
        assertEquals(at, num(x.get("saved_input_bytes")), c.savedInputBytes);
        assertEquals(at, num(x.get("relu_mask_bytes")), c.reluMaskBytes);
        assertEquals(at, num(x.get("inference_activation_bytes")), c.inferenceActivationBytes);
        assertEquals(at, num(x.get("activation_bytes")), c.activationBytes);
        assertEquals(at, num(x.get("input_grad_macs")), c.inputGradMacs);
        assertEquals(at, num(x.get("weight_grad_macs")), c.weightGradMacs);
        assertEquals(at, num(x.get("total_bytes")), c.totalBytes());
        assertEquals(at, num(x.get("backward_macs")), c.backwardMacs());
        if (x.get("deepest_layer") == Json.NULL) {
          assertNull(at, c.deepestLayer);
        } else {
          assertEquals(at, num(x.get("deepest_layer")), (long) c.deepestLayer);
        }
        cases++;
      }
    }
    assertEquals(9 * 9 * 5, cases);
  }
}
