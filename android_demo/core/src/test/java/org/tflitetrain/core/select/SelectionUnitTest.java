package org.tflitetrain.core.select;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tflitetrain.core.cost.BackwardCost;
import org.tflitetrain.core.cost.LayerSpec;
import org.tflitetrain.core.cost.LayerTable;

/** Hand-computed cases for the selection port (the golden test covers the Python parity). */
public class SelectionUnitTest {
  /** stem (3->4, k3 s1 8x8), b00_project 1x1 4->4, final 1x1 4->8; all 8x8. */
  static LayerTable table() {
    List<LayerSpec> layers = new ArrayList<>();
    layers.add(new LayerSpec(0, "stem", -1, "stem", 3, 1, 3, 4, 1, new int[] {8, 8}, new int[] {8, 8}, "relu6"));
    layers.add(new LayerSpec(1, "b00_project", 0, "project", 1, 1, 4, 4, 1, new int[] {8, 8}, new int[] {8, 8},
        "linear"));
    layers.add(new LayerSpec(2, "final", 1, "final", 1, 1, 4, 8, 1, new int[] {8, 8}, new int[] {8, 8}, "relu6"));
    return new LayerTable(layers);
  }

  @Test
  public void pairwiseSumFollowsNumpyBlocks() {
    double[] small = {1e16, 1.0, -1e16, 1.0};
    // n < 8: sequential, ((1e16 + 1) - 1e16) + 1 = 0 + 1 = 1 (1e16 + 1 rounds to 1e16)
    assertEquals(1.0, FisherPotential.pairwiseSum(small, 0, 4), 0.0);
    double[] eight = {1e16, 1.0, -1e16, 1.0, 0, 0, 0, 0};
    // 8 accumulators: ((1e16 + 1) + (-1e16 + 1)) + 0 = 1e16 - 1e16 + ... = 0
    assertEquals(0.0, FisherPotential.pairwiseSum(eight, 0, 8), 0.0);
    double[] many = new double[300];
    java.util.Arrays.fill(many, 0.5);
    assertEquals(150.0, FisherPotential.potential(many), 0.0);
    assertThrows(IllegalArgumentException.class, () -> FisherPotential.potential(new double[] {1, -1}));
    assertThrows(IllegalArgumentException.class, () -> FisherPotential.potential(new double[0]));
  }

  @Test
  public void scoresNormaliseByTheMaximaOverAllLayers() {
    LayerTable t = table();
    // |W|: stem 108, b00_project 16, final 32; M = 64 |W|. For final: memory 32/108, compute 32/108.
    Map<String, Double> p = new LinkedHashMap<>();
    p.put("final", 2.0);
    double m = 32.0 / 108.0;
    assertEquals(2.0 / (m * m), LayerScoring.multiObjectiveScores(t, p, Criterion.TINYTRAIN).get("final"), 0.0);
    assertEquals(2.0 / m, LayerScoring.multiObjectiveScores(t, p, Criterion.FISHER_MEMORY).get("final"), 0.0);
    assertEquals(2.0 / m, LayerScoring.multiObjectiveScores(t, p, Criterion.FISHER_COMPUTE).get("final"), 0.0);
    assertEquals(2.0, LayerScoring.multiObjectiveScores(t, p, Criterion.FISHER).get("final"), 0.0);
    assertThrows(IllegalArgumentException.class, () -> LayerScoring.multiObjectiveScores(t, p, Criterion.L2));
  }

  @Test
  public void rankingBreaksTiesDeeperFirst() {
    Map<String, Double> s = new LinkedHashMap<>();
    s.put("stem", 1.0);
    s.put("b00_project", 3.0);
    s.put("final", 1.0);
    assertEquals(List.of("b00_project", "final", "stem"), LayerScoring.rankLayers(table(), s));
  }

  @Test
  public void topKBreaksTiesLowerIndexFirstAndSortsAscending() {
    assertArrayEquals(new int[] {1, 3}, ChannelSelection.topK(new double[] {1, 5, 2, 5, 5}, 2));
    assertArrayEquals(new int[] {0, 1, 2}, ChannelSelection.topK(new double[] {0, 0, 0, 0}, 3));
    assertThrows(IllegalArgumentException.class, () -> ChannelSelection.topK(new double[] {1}, 2));
    // weights (fan_in=2, C_out=3) channel last: norms sqrt(1+0), sqrt(4+4), sqrt(0+9)
    assertArrayEquals(new int[] {1, 2}, ChannelSelection.l2Channels(new double[] {1, 2, 0, 0, 2, 3}, 3, 2));
  }

  @Test
  public void l2ChannelsTakeTheLiveChannelsFirst() {
    // Norms 5, 1, 5, 3 (one input row, output channel last).
    double[] w = {5, 1, -5, 3};
    assertArrayEquals(new int[] {0, 2}, ChannelSelection.l2Channels(w, 4, 2));
    assertArrayEquals(new int[] {0, 2}, ChannelSelection.l2Channels(w, 4, 2, null));
    // Channels 0 and 2 get no gradient: the live ones by norm (3 at 3, then 1 at 1).
    boolean[] live = {false, true, false, true};
    assertArrayEquals(new int[] {3}, ChannelSelection.l2Channels(w, 4, 1, live));
    assertArrayEquals(new int[] {1, 3}, ChannelSelection.l2Channels(w, 4, 2, live));
    // Fewer live channels than K: the dead ones fill up by norm (5 at 0 and at 2: tie -> lower index).
    assertArrayEquals(new int[] {0, 1, 3}, ChannelSelection.l2Channels(w, 4, 3, live));
    assertArrayEquals(new int[] {0, 1, 2, 3}, ChannelSelection.l2Channels(w, 4, 4, live));
    // All live or all dead: the plain norm order.
    assertArrayEquals(new int[] {0, 2}, ChannelSelection.l2Channels(w, 4, 2, new boolean[] {true, true, true, true}));
    assertArrayEquals(new int[] {0, 2}, ChannelSelection.l2Channels(w, 4, 2, new boolean[4]));
    // Two rows (fan_in 2, C_out 3): norms sqrt(1), sqrt(8), sqrt(9); channel 2 dead.
    assertArrayEquals(new int[] {0, 1},
        ChannelSelection.l2Channels(new double[] {1, 2, 0, 0, 2, 3}, 3, 2, new boolean[] {true, true, false}));
    assertThrows(IllegalArgumentException.class, () -> ChannelSelection.l2Channels(w, 4, 1, new boolean[3]));
    assertThrows(IllegalArgumentException.class, () -> ChannelSelection.l2Channels(w, 4, 5, live));
    assertThrows(IllegalArgumentException.class, () -> ChannelSelection.l2Channels(w, 4, 0, live));
  }

  @Test
  public void liveChannelsAreNonZeroOnSomeTask() {
    List<Map<String, double[]>> tasks = List.of(Map.of("x", new double[] {0.0, 0.5, 0.0, 0.0}),
        Map.of("x", new double[] {0.0, 0.0, 1e-30, 0.0}));
    assertArrayEquals(new boolean[] {false, true, true, false}, ChannelSelection.liveChannels(tasks, "x"));
    assertArrayEquals(new boolean[] {false, true, false, false},
        ChannelSelection.liveChannels(tasks.subList(0, 1), "x"));
    assertThrows(IllegalArgumentException.class, () -> ChannelSelection.liveChannels(List.of(), "x"));
    assertThrows(IllegalArgumentException.class, () -> ChannelSelection.liveChannels(null, "x"));
    IllegalArgumentException missing = assertThrows(IllegalArgumentException.class,
        () -> ChannelSelection.liveChannels(List.of(tasks.get(0), Map.of("y", new double[4])), "x"));
    assertTrue(missing.getMessage(), missing.getMessage().contains("tasks[1] has no Fisher vector for layer x"));
    IllegalArgumentException lengths = assertThrows(IllegalArgumentException.class,
        () -> ChannelSelection.liveChannels(List.of(tasks.get(0), Map.of("x", new double[3])), "x"));
    assertTrue(lengths.getMessage(), lengths.getMessage().contains("different lengths"));
    assertThrows(IllegalArgumentException.class,
        () -> ChannelSelection.liveChannels(List.of(Map.of("x", new double[] {1.0, -1.0})), "x"));
    assertThrows(IllegalArgumentException.class,
        () -> ChannelSelection.liveChannels(List.of(Map.of("x", new double[] {1.0, Double.NaN})), "x"));
  }

  @Test
  public void sparseUpdateTakesTheChannelsLiveOnTheSourceTasksFirst() {
    LayerTable t = table();
    // final: fan_in 4, C_out 8; only the first row is non-zero, norms 1..8 (channel o: o + 1).
    double[] w = new double[32];
    for (int o = 0; o < 8; o++) {
      w[o] = o + 1;
    }
    Map<String, double[]> weights = Map.of("final", w);
    SelectionConfig fixed = SelectionConfig.builder().policy(PolicyKind.SPARSE_UPDATE).layers(List.of("final"))
        .channelRatio(0.25).build();  // K = 2
    List<String> candidates = List.of("final");
    // Without source tasks: the plain norm order.
    assertArrayEquals(new int[] {6, 7}, Policies.select(t, fixed, candidates, null, null, weights).channels("final"));
    // 6 and 7 are 0 on every task, 5 is live on task 0 only and 4 on task 1 only.
    List<Map<String, double[]>> tasks = List.of(Map.of("final", new double[] {1, 1, 1, 0, 0, 2, 0, 0}),
        Map.of("final", new double[] {0, 0, 0, 0, 3, 0, 0, 0}));
    assertArrayEquals(new int[] {4, 5}, Policies.select(t, fixed, candidates, null, tasks, weights).channels("final"));
    // The same with the ranking from the source tasks' mean potentials.
    SelectionConfig ranked = fixed.toBuilder().layers(null).build();
    assertArrayEquals(new int[] {4, 5}, Policies.select(t, ranked, candidates, null, tasks, weights).channels("final"));
    // K = 8 > 6 live: every channel.
    SelectionConfig all = fixed.toBuilder().channelRatio(1.0).build();
    assertArrayEquals(new int[] {0, 1, 2, 3, 4, 5, 6, 7},
        Policies.select(t, all, candidates, null, tasks, weights).channels("final"));
    // The fisher tasks are checked whenever they are given, a fixed list too.
    IllegalArgumentException empty = assertThrows(IllegalArgumentException.class,
        () -> Policies.select(t, fixed, candidates, null, List.of(), weights));
    assertTrue(empty.getMessage(), empty.getMessage().contains("must not be empty"));
    IllegalArgumentException missing = assertThrows(IllegalArgumentException.class,
        () -> Policies.select(t, fixed, List.of("b00_project", "final"), null, tasks, weights));
    assertTrue(missing.getMessage(), missing.getMessage().contains("no Fisher vector for candidate layers [b00_project]"));
    assertThrows(IllegalArgumentException.class, () -> Policies.select(t, fixed, candidates, null,
        List.of(Map.of("final", new double[] {1, 1})), weights));
    assertThrows(IllegalArgumentException.class,
        () -> Policies.sparseUpdateRanking(t, fixed, candidates, List.of(), weights));
  }

  @Test
  public void budgetBoundsAreInclusive() {
    LayerTable t = table();
    BackwardCost cost = org.tflitetrain.core.cost.CostModel.backwardCostByName(t, Map.of("final", 2),
        org.tflitetrain.core.cost.Optimizer.ADAM, 1, true);
    assertTrue(Budget.of(cost.totalBytes(), cost.backwardMacs()).admits(cost, t));
    assertFalse(Budget.of(cost.totalBytes() - 1, cost.backwardMacs()).admits(cost, t));
    assertFalse(Budget.of(cost.totalBytes(), cost.backwardMacs() - 1).admits(cost, t));
    assertTrue(Budget.unlimited().admits(cost, t));
    assertThrows(IllegalArgumentException.class, () -> new Budget(1, 1.0, 0.5));
    assertThrows(IllegalArgumentException.class, () -> Budget.of(-1, 1));
    assertThrows(IllegalArgumentException.class, () -> Budget.of(Double.NaN, 1));
  }

  @Test
  public void greedySkipsALayerThatDoesNotFitAndContinues() {
    LayerTable t = table();
    // final alone fits; adding the stem (back-propagation to layer 0) exceeds the compute bound; b00_project
    // is shallower than final but deeper than the stem and still fits.
    BackwardCost finalOnly = org.tflitetrain.core.cost.CostModel.backwardCostByName(t, Map.of("final", 8, "b00_project", 4),
        org.tflitetrain.core.cost.Optimizer.ADAM, 1, true);
    Budget budget = Budget.of(Double.POSITIVE_INFINITY, finalOnly.backwardMacs());
    List<String> chosen = GreedyLayerSelection.select(t, List.of("final", "stem", "b00_project"), budget, 1.0,
        org.tflitetrain.core.cost.Optimizer.ADAM, 1, true, OnEmpty.RAISE);
    assertEquals(List.of("final", "b00_project"), chosen);
    assertThrows(BudgetException.class, () -> GreedyLayerSelection.select(t, List.of("final"), Budget.of(1, 1), 1.0,
        org.tflitetrain.core.cost.Optimizer.ADAM, 1, true, OnEmpty.RAISE));
    assertEquals(List.of(), GreedyLayerSelection.select(t, List.of("final"), Budget.of(1, 1), 1.0,
        org.tflitetrain.core.cost.Optimizer.ADAM, 1, true, OnEmpty.EMPTY));
  }

  @Test
  public void policyNamesAndBaselines() {
    assertEquals(PolicyKind.TINYTRAIN, PolicyKind.fromName("TinyTrain"));
    assertEquals(PolicyKind.LAST_LAYER, PolicyKind.fromName("last-layer"));
    assertThrows(IllegalArgumentException.class, () -> PolicyKind.fromName("random"));
    assertThrows(IllegalArgumentException.class, () -> ChannelMethod.fromName("random"));
    LayerTable t = table();
    SelectedChannels last = Policies.select(t, SelectionConfig.builder().policy(PolicyKind.LAST_LAYER).build(),
        List.of("final", "b00_project"), null, null, null);
    assertEquals(List.of("final"), last.layers());
    assertArrayEquals(new int[] {0, 1, 2, 3, 4, 5, 6, 7}, last.channels("final"));
    float[] mask = last.channelMask(t, List.of("b00_project", "final"));
    assertEquals(12, mask.length);
    assertEquals(0f, mask[3], 0f);
    assertEquals(1f, mask[4], 0f);
    assertTrue(Policies.select(t, SelectionConfig.builder().policy(PolicyKind.NONE).build(), null, null, null, null)
        .isEmpty());
  }
}
