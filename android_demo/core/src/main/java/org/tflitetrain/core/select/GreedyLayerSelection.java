package org.tflitetrain.core.select;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.logging.Logger;
import org.tflitetrain.core.cost.BackwardCost;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.cost.LayerTable;
import org.tflitetrain.core.cost.Optimizer;

/**
 * Greedy budgeted layer selection (TinyTrain §4, Algorithm 1 line 4); port of
 * {@code sparse/layer_selection.py}:
 *
 * <pre>
 *   L_sel = {}
 *   for layer i in ranking:
 *     if cost(L_sel + {i}) fits the budget: L_sel = L_sel + {i}
 *     else: skip i and continue
 * </pre>
 *
 * The cost of a set is {@link CostModel#backwardCost} with K_i = channelCount(C_out_i, ratio); both
 * bounds are inclusive. If nothing fits: {@link OnEmpty#RAISE} throws {@link BudgetException},
 * {@link OnEmpty#EMPTY} returns no layers (logged as a warning).
 */
public final class GreedyLayerSelection {
  private static final Logger LOG = Logger.getLogger(GreedyLayerSelection.class.getName());

  private GreedyLayerSelection() {}

  /** K_i = channelCount(C_out_i, ratio) for each named layer. */
  public static Map<String, Integer> channelCounts(LayerTable table, List<String> layers, double ratio) {
    Map<String, Integer> counts = new LinkedHashMap<>();
    for (String name : layers) {
      counts.put(name, CostModel.channelCount(table.get(name).outChannels, ratio));
    }
    return counts;
  }

  /**
   * Adds layers in ranking order while the backward cost stays within the budget.
   *
   * @return the selected layer names in the order they were added (rank order)
   * @throws BudgetException nothing fits and onEmpty is RAISE
   * @throws IllegalArgumentException unknown / repeated layer, bad ratio
   */
  public static List<String> select(LayerTable table, List<String> ranking, Budget budget, double channelRatio,
      Optimizer optimizer, int batchSize, boolean gradientBuffer, OnEmpty onEmpty) {
    if (budget == null || onEmpty == null) {
      throw new IllegalArgumentException("budget and onEmpty must not be null; got " + budget + ", " + onEmpty);
    }
    if (new HashSet<>(ranking).size() != ranking.size()) {
      throw new IllegalArgumentException("ranking must not repeat a layer; got " + ranking);
    }
    Map<String, Integer> counts = channelCounts(table, ranking, channelRatio);
    List<String> selected = new ArrayList<>();
    for (String name : ranking) {
      Map<String, Integer> trial = new LinkedHashMap<>();
      for (String s : selected) {
        trial.put(s, counts.get(s));
      }
      trial.put(name, counts.get(name));
      BackwardCost cost = CostModel.backwardCostByName(table, trial, optimizer, batchSize, gradientBuffer);
      if (budget.admits(cost, table)) {
        selected.add(name);
      }
    }
    if (selected.isEmpty() && !ranking.isEmpty()) {
      String message = "no candidate layer fits the budget (" + budget + ", compute limit="
          + budget.computeLimit(table) + " MACs)";
      if (onEmpty == OnEmpty.RAISE) {
        throw new BudgetException(message);
      }
      LOG.warning(message + "; returning an empty selection (no update)");
    }
    return selected;
  }
}
