package org.tflitetrain.core.select;

import static org.tflitetrain.core.Resources.list;
import static org.tflitetrain.core.Resources.obj;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.junit.Test;
import org.tflitetrain.core.Resources;
import org.tflitetrain.core.cost.BackwardCost;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.cost.GoldenCostModelTest;
import org.tflitetrain.core.cost.LayerSpec;
import org.tflitetrain.core.cost.LayerTable;
import org.tflitetrain.core.json.Json;

/**
 * The Python selection's golden vectors ({@code tflite-train golden}: selection_*.json), recomputed with
 * the Java port: potentials and scores within 1e-12 relative, everything else (rankings, layers,
 * channels, masks, costs, BudgetError) exactly.
 */
public class GoldenSelectionTest {
  private static final double REL = 1e-12;

  static {
    // The "nothing fits" cases with on_empty=empty log a warning each; keep the test output readable.
    Logger.getLogger(GreedyLayerSelection.class.getName()).setLevel(Level.SEVERE);
  }

  private static double num(Object o) {
    return ((Number) o).doubleValue();
  }

  private static List<String> strings(Object o) {
    List<String> out = new ArrayList<>();
    list(o).forEach(x -> out.add((String) x));
    return out;
  }

  private static int[] ints(Object o) {
    List<Object> values = list(o);
    int[] out = new int[values.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = (int) (long) (Long) values.get(i);
    }
    return out;
  }

  private static double[] doubles(Object o) {
    List<Object> values = list(o);
    double[] out = new double[values.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = num(values.get(i));
    }
    return out;
  }

  static List<Map<String, Object>> files() {
    Map<String, Object> index = obj(Json.parse(Resources.text("/golden/index.json")));
    List<Map<String, Object>> out = new ArrayList<>();
    for (Object name : list(index.get("selection_files"))) {
      out.add(obj(Json.parse(Resources.text("/golden/" + name))));
    }
    assertEquals("golden selection files (mcunet, mbv2, proxyless, tiny)", 4, out.size());
    return out;
  }

  /** Python's synthetic_weights: w_j = (((j*mult + index*layerMult + seed*97) mod modulus) - 1000) / scale. */
  static double[] weights(Map<String, Object> spec, LayerSpec layer) {
    long mult = (Long) spec.get("multiplier");
    long layerMult = (Long) spec.get("layer_multiplier");
    long modulus = (Long) spec.get("modulus");
    long seed = (Long) spec.get("seed");
    double scale = num(spec.get("scale"));
    int n = (int) (layer.fanIn() * layer.outChannels);
    double[] w = new double[n];
    for (int j = 0; j < n; j++) {
      long raw = (j * mult + layer.index * layerMult + seed * 97) % modulus;
      w[j] = (raw - 1000) / scale;
    }
    return w;
  }

  static Map<String, double[]> allWeights(Map<String, Object> file, LayerTable table) {
    Map<String, double[]> out = new LinkedHashMap<>();
    for (LayerSpec layer : table.layers()) {
      out.put(layer.name, weights(obj(file.get("weights")), layer));
    }
    return out;
  }

  static Map<String, double[]> fisher(Map<String, Object> file, String kind) {
    Map<String, double[]> out = new LinkedHashMap<>();
    obj(obj(file.get("fisher")).get(kind)).forEach((name, values) -> out.put(name, doubles(values)));
    return out;
  }

  private static void assertRel(String where, double expected, double actual) {
    double tolerance = REL * Math.abs(expected);
    if (!(Math.abs(expected - actual) <= tolerance)) {
      fail(where + ": expected " + expected + " got " + actual + " (relative tolerance " + REL + ")");
    }
  }

  static String sha256(String text) {
    try {
      byte[] digest = MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.US_ASCII));
      StringBuilder hex = new StringBuilder();
      for (byte b : digest) {
        hex.append(String.format("%02x", b));
      }
      return hex.toString();
    } catch (NoSuchAlgorithmException err) {
      throw new IllegalStateException(err);
    }
  }

  @Test
  public void syntheticWeightsMatchPython() {
    for (Map<String, Object> file : files()) {
      LayerTable table = GoldenCostModelTest.table(file);
      Map<String, Object> check = obj(obj(file.get("weights")).get("check"));
      assertTrue(!check.isEmpty());
      check.forEach((name, expected) -> {
        double[] w = weights(obj(file.get("weights")), table.get(name));
        double sum = 0;
        for (double v : w) {
          sum += v * v;
        }
        assertEquals(file.get("backbone") + "/" + name, num(expected), sum, 0.0);
      });
    }
  }

  @Test
  public void fisherPotentialsAndMeans() {
    for (Map<String, Object> file : files()) {
      Map<String, Object> potentials = obj(file.get("potentials"));
      List<Map<String, double[]>> tasks = new ArrayList<>();
      for (String kind : List.of("seed0", "seed1", "ties")) {
        Map<String, double[]> fisher = fisher(file, kind);
        tasks.add(fisher);
        Map<String, Double> actual = FisherPotential.potentials(fisher);
        obj(potentials.get(kind)).forEach((name, expected) ->
            assertRel(file.get("backbone") + "/" + kind + "/" + name, num(expected), actual.get(name)));
      }
      Map<String, Double> means = FisherPotential.meanPotentials(tasks);
      obj(potentials.get("mean")).forEach((name, expected) ->
          assertRel(file.get("backbone") + "/mean/" + name, num(expected), means.get(name)));
    }
  }

  @Test
  public void channelCountsAndTopK() {
    int cases = 0;
    for (Map<String, Object> file : files()) {
      for (Object entry : list(file.get("channel_count"))) {
        Map<String, Object> c = obj(entry);
        assertEquals((long) (Long) c.get("count"),
            CostModel.channelCount((int) num(c.get("out_channels")), num(c.get("ratio"))));
      }
      for (Object entry : list(file.get("top_k"))) {
        Map<String, Object> c = obj(entry);
        double[] values = fisher(file, (String) c.get("fisher")).get((String) c.get("layer"));
        assertArrayEquals(file.get("backbone") + " top_k " + c, ints(c.get("expected")),
            ChannelSelection.topK(values, (int) num(c.get("k"))));
        cases++;
      }
    }
    assertTrue("top-K cases: " + cases, cases > 50);
  }

  private static List<Map<String, double[]>> tasks(Map<String, Object> file, List<String> kinds) {
    List<Map<String, double[]>> out = new ArrayList<>();
    kinds.forEach(kind -> out.add(fisher(file, kind)));
    return out;
  }

  /**
   * Live channels (non-zero Delta on some source task) and SparseUpdate's live-first L2 channels, against
   * Python's {@code live_channels} / {@code l2_channels(..., live=...)}; the cases include layers with
   * fewer live channels than K (the dead ones fill up by norm) and many where the order differs from the
   * plain norm order.
   */
  @Test
  public void liveChannelsAndLiveFirstL2Channels() {
    int cases = 0;
    int differ = 0;
    int fillUp = 0;
    for (Map<String, Object> file : files()) {
      LayerTable table = GoldenCostModelTest.table(file);
      Map<String, Object> spec = obj(file.get("live_channels"));
      List<Map<String, double[]>> tasks = tasks(file, strings(spec.get("fisher_tasks")));
      Map<String, boolean[]> live = new LinkedHashMap<>();
      obj(spec.get("dead")).forEach((name, dead) -> {
        boolean[] actual = ChannelSelection.liveChannels(tasks, name);
        boolean[] expected = new boolean[table.get(name).outChannels];
        Arrays.fill(expected, true);
        for (int o : ints(dead)) {
          expected[o] = false;
        }
        assertArrayEquals(file.get("backbone") + " live " + name, expected, actual);
        live.put(name, actual);
      });
      for (Object entry : list(file.get("l2_live"))) {
        Map<String, Object> c = obj(entry);
        String name = (String) c.get("layer");
        int k = (int) num(c.get("k"));
        LayerSpec layer = table.get(name);
        double[] w = weights(obj(file.get("weights")), layer);
        int[] expected = ints(c.get("expected"));
        int[] plain = ints(c.get("plain"));
        String where = file.get("backbone") + " l2_live " + c;
        assertArrayEquals(where, expected, ChannelSelection.l2Channels(w, layer.outChannels, k, live.get(name)));
        assertArrayEquals(where + " (plain)", plain, ChannelSelection.l2Channels(w, layer.outChannels, k));
        assertArrayEquals(where + " (null live)", plain, ChannelSelection.l2Channels(w, layer.outChannels, k, null));
        int liveCount = 0;
        for (boolean b : live.get(name)) {
          liveCount += b ? 1 : 0;
        }
        differ += Arrays.equals(expected, plain) ? 0 : 1;
        fillUp += liveCount > 0 && liveCount < k ? 1 : 0;
        cases++;
      }
    }
    assertTrue("l2_live cases " + cases, cases > 100);
    assertTrue("live-first differs from the plain order: " + differ, differ > 20);
    assertTrue("fewer live channels than K: " + fillUp, fillUp > 10);
  }

  private static Budget budget(Map<String, Object> b) {
    Object memory = b.get("memory_bytes");
    Object macs = b.get("compute_macs");
    Object fraction = b.get("compute_fraction");
    return new Budget(memory == Json.NULL ? Double.POSITIVE_INFINITY : num(memory),
        macs == Json.NULL ? null : num(macs), fraction == Json.NULL ? null : num(fraction));
  }

  private static SelectionConfig config(Map<String, Object> c) {
    SelectionConfig.Builder b = SelectionConfig.builder().policy(PolicyKind.fromName((String) c.get("policy")));
    if (c.containsKey("budget")) {
      b.budget(budget(obj(c.get("budget"))));
    }
    if (c.containsKey("channel_ratio")) {
      b.channelRatio(num(c.get("channel_ratio")));
    }
    if (c.containsKey("criterion")) {
      b.criterion(Criterion.fromName((String) c.get("criterion")));
    }
    if (c.containsKey("channel_method")) {
      b.channelMethod(ChannelMethod.fromName((String) c.get("channel_method")));
    }
    if (c.containsKey("on_empty")) {
      b.onEmpty(OnEmpty.fromName((String) c.get("on_empty")));
    }
    if (c.containsKey("fixed_layers")) {
      b.layers(strings(c.get("fixed_layers")));
    }
    return b.build();
  }

  @Test
  public void policiesMatchPython() {
    int cases = 0;
    int errors = 0;
    int empty = 0;
    int liveFirst = 0;
    for (Map<String, Object> file : files()) {
      LayerTable table = GoldenCostModelTest.table(file);
      assertEquals((long) (Long) file.get("total_forward_macs"), CostModel.totalForwardMacs(table));
      Map<String, double[]> weights = allWeights(file, table);
      List<Map<String, double[]>> defaultTasks = tasks(file, List.of("seed0", "seed1", "ties"));
      for (Object entry : list(file.get("cases"))) {
        Map<String, Object> c = obj(entry);
        List<Map<String, double[]>> tasks = c.containsKey("fisher_tasks")
            ? tasks(file, strings(c.get("fisher_tasks"))) : defaultTasks;
        String where = file.get("backbone") + " case " + cases + " " + c.get("policy") + "/" + c.get("blocks")
            + "/" + c.get("fisher") + "/" + c.get("criterion") + "/" + c.get("budget_label");
        List<String> candidates = strings(c.get("candidates"));
        SelectionConfig config = config(c);
        Map<String, double[]> fisher = fisher(file, c.containsKey("fisher") ? (String) c.get("fisher") : "seed0");
        Map<String, double[]> sub = new LinkedHashMap<>();
        candidates.forEach(n -> sub.put(n, fisher.get(n)));
        Map<String, double[]> taskFisher = c.get("policy").equals("tinytrain") ? sub : fisher;
        if (c.containsKey("ranking")) {
          List<String> ranking = c.get("policy").equals("tinytrain")
              ? Policies.tinyTrainRanking(table, config, Policies.candidates(table, candidates), sub, weights)
              : Policies.sparseUpdateRanking(table, config, candidates, tasks, weights);
          assertEquals(where + " ranking", strings(c.get("ranking")), ranking);
        }
        if (c.containsKey("scores")) {
          Map<String, Double> scores;
          if (config.criterion == Criterion.L2) {
            Map<String, double[]> w = new LinkedHashMap<>();
            candidates.forEach(n -> w.put(n, weights.get(n)));
            scores = LayerScoring.l2LayerScores(table, w);
          } else if (c.get("policy").equals("tinytrain")) {
            scores = LayerScoring.fisherScores(table, sub, config.criterion);
          } else {
            Map<String, Double> means = FisherPotential.meanPotentials(tasks);
            Map<String, Double> p = new LinkedHashMap<>();
            candidates.forEach(n -> p.put(n, means.get(n)));
            scores = LayerScoring.multiObjectiveScores(table, p, config.criterion);
          }
          Map<String, Double> actual = scores;
          obj(c.get("scores")).forEach((name, expected) -> assertRel(where + " score " + name, num(expected),
              actual.get(name)));
        }
        if (c.containsKey("error")) {
          assertEquals("BudgetError", c.get("error"));
          assertThrows(where, BudgetException.class,
              () -> Policies.select(table, config, candidates, taskFisher, tasks, weights));
          errors++;
          cases++;
          continue;
        }
        SelectedChannels chosen = Policies.select(table, config, candidates, taskFisher, tasks, weights);
        List<String> layers = strings(c.get("layers"));
        assertEquals(where + " layers", layers, chosen.layers());
        Map<String, Object> channels = obj(c.get("channels"));
        assertEquals(where + " channel layers", new TreeSet<>(channels.keySet()), new TreeSet<>(chosen.layers()));
        for (String name : layers) {
          int[] expected = ints(channels.get(name));
          assertArrayEquals(where + " channels of " + name, expected, chosen.channels(name));
          if (c.get("policy").equals("sparse_update") && !Arrays.equals(expected,
              ChannelSelection.l2Channels(weights.get(name), table.get(name).outChannels, expected.length))) {
            liveFirst++;  // the live-first order chose other channels than the plain norm order
          }
        }
        float[] mask = chosen.channelMask(table, candidates);
        StringBuilder bits = new StringBuilder();
        int ones = 0;
        for (float v : mask) {
          bits.append(v == 1.0f ? '1' : '0');
          ones += v == 1.0f ? 1 : 0;
        }
        assertEquals(where + " mask ones", (long) (Long) c.get("mask_ones"), ones);
        assertEquals(where + " mask sha256", c.get("mask_sha256"), sha256(bits.toString()));
        BackwardCost cost = chosen.cost(table, config.optimizer, config.batchSize, config.gradientBuffer);
        Map<String, Object> e = obj(c.get("cost"));
        assertEquals(where + " updated_weight_bytes", (long) (Long) e.get("updated_weight_bytes"), cost.updatedWeightBytes);
        assertEquals(where + " optimizer_bytes", (long) (Long) e.get("optimizer_bytes"), cost.optimizerBytes);
        assertEquals(where + " activation_bytes", (long) (Long) e.get("activation_bytes"), cost.activationBytes);
        assertEquals(where + " total_bytes", (long) (Long) e.get("total_bytes"), cost.totalBytes());
        assertEquals(where + " input_grad_macs", (long) (Long) e.get("input_grad_macs"), cost.inputGradMacs);
        assertEquals(where + " weight_grad_macs", (long) (Long) e.get("weight_grad_macs"), cost.weightGradMacs);
        assertEquals(where + " backward_macs", (long) (Long) e.get("backward_macs"), cost.backwardMacs());
        Object deepest = e.get("deepest_layer");
        assertEquals(where + " deepest_layer", deepest == Json.NULL ? null : (Integer) (int) (long) (Long) deepest,
            cost.deepestLayer);
        if (layers.isEmpty()) {
          empty++;
        }
        cases++;
      }
    }
    assertTrue("cases " + cases, cases >= 4 * 200);
    assertTrue("BudgetError cases " + errors, errors > 0);
    assertTrue("empty selections " + empty, empty > 0);
    assertTrue("SparseUpdate layers whose live-first channels differ from the plain norm order: " + liveFirst,
        liveFirst > 10);
  }
}
