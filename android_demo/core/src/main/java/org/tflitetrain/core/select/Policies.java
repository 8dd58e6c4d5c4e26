package org.tflitetrain.core.select;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.cost.LayerTable;

/**
 * The selection policies; port of {@code sparse/policies.py} (random channels excepted):
 *
 * <ul>
 *   <li>none: no update;
 *   <li>last_layer: the deepest candidate, all channels (budget ignored);
 *   <li>full_train: every candidate, all channels (budget ignored);
 *   <li>sparse_update (static): ranking = {@code config.layers} if given, else the candidates scored
 *       by {@code config.criterion} on the mean Fisher potential over tasks P_bar_l = 1/T sum_t P_{t,l}
 *       ("l2": by weight norms); greedy under the budget; channels = top-K by weight L2 norm, taken first
 *       among the channels live on the source tasks when {@code fisherTasks} are given;
 *   <li>tinytrain (dynamic, Algorithm 1 lines 1-4): this task's Delta -> P (Eq. 2) -> s (Eq. 3 or an
 *       ablation) -> greedy layers under the budget -> top-K channels by Delta (or by weight L2).
 * </ul>
 *
 * Inputs: {@code candidates} (null = every layer of the table; for tinytrain the layers of
 * {@code fisher}); {@code fisher} layer -> Delta; {@code fisherTasks} a list of such maps;
 * {@code weights} layer -> fan_in * C_out weights with the output channel last (only where an L2 norm is
 * needed). Results have their layers in forward order.
 */
public final class Policies {
  private Policies() {}

  /**
   * Runs {@code config.policy}.
   *
   * @throws BudgetException nothing fits and {@code config.onEmpty} is RAISE
   * @throws IllegalArgumentException missing / inconsistent inputs
   */
  public static SelectedChannels select(LayerTable table, SelectionConfig config, List<String> candidates,
      Map<String, double[]> fisher, List<Map<String, double[]>> fisherTasks, Map<String, double[]> weights) {
    if (config == null) {
      throw new IllegalArgumentException("config must not be null");
    }
    switch (config.policy) {
      case NONE:
        return new SelectedChannels(Map.of(), PolicyKind.NONE.wireName);
      case LAST_LAYER: {
        List<String> names = candidates(table, candidates);
        String last = names.get(names.size() - 1);
        return new SelectedChannels(allChannels(table, List.of(last)), PolicyKind.LAST_LAYER.wireName);
      }
      case FULL_TRAIN:
        return new SelectedChannels(allChannels(table, candidates(table, candidates)), PolicyKind.FULL_TRAIN.wireName);
      case SPARSE_UPDATE:
        return sparseUpdate(table, config, candidates, fisherTasks, weights);
      case TINYTRAIN:
        return tinyTrain(table, config, candidates, fisher, weights);
      default:
        throw new IllegalArgumentException("unknown policy " + config.policy);
    }
  }

  /**
   * The static SparseUpdate policy's layer ranking (before the budget).
   *
   * @throws IllegalArgumentException invalid {@code fisherTasks} (checked whenever they are given), a fixed
   *     layer that is not a candidate, or neither {@code config.layers} nor {@code fisherTasks}
   */
  public static List<String> sparseUpdateRanking(LayerTable table, SelectionConfig config, List<String> candidates,
      List<Map<String, double[]>> fisherTasks, Map<String, double[]> weights) {
    List<String> names = candidates(table, candidates);
    checkFisherTasks(table, names, fisherTasks);
    return rankSparseUpdate(table, config, names, fisherTasks, weights);
  }

  /** The ranking over the candidate {@code names}; {@code fisherTasks} already checked. */
  private static List<String> rankSparseUpdate(LayerTable table, SelectionConfig config, List<String> names,
      List<Map<String, double[]>> fisherTasks, Map<String, double[]> weights) {
    if (config.layers != null) {
      for (String name : config.layers) {
        if (!names.contains(name)) {
          throw new IllegalArgumentException("config.layers " + name + " is not a candidate layer");
        }
      }
      return config.layers;
    }
    if (config.criterion == Criterion.L2) {
      return LayerScoring.rankLayers(table, LayerScoring.l2LayerScores(table, needWeights(table, weights, names)));
    }
    if (fisherTasks == null) {
      throw new IllegalArgumentException("sparse_update needs fisher tasks (meta-training Fisher maps) or config.layers");
    }
    Map<String, Double> means = FisherPotential.meanPotentials(fisherTasks);
    Map<String, Double> sub = new LinkedHashMap<>();
    for (String name : names) {
      sub.put(name, means.get(name));
    }
    return LayerScoring.rankLayers(table, LayerScoring.multiObjectiveScores(table, sub, config.criterion));
  }

  /**
   * SparseUpdate's source-task Fisher maps, checked whenever they are given (null = none): non-empty, each
   * consistent with the table and holding every candidate layer.
   */
  private static void checkFisherTasks(LayerTable table, List<String> names, List<Map<String, double[]>> fisherTasks) {
    if (fisherTasks == null) {
      return;
    }
    if (fisherTasks.isEmpty()) {
      throw new IllegalArgumentException("fisher tasks must not be empty (null = no meta-training Fisher)");
    }
    for (int t = 0; t < fisherTasks.size(); t++) {
      LayerScoring.checkFisherShapes(table, fisherTasks.get(t));
      List<String> missing = new ArrayList<>();
      for (String name : names) {
        if (!fisherTasks.get(t).containsKey(name)) {
          missing.add(name);
        }
      }
      if (!missing.isEmpty()) {
        throw new IllegalArgumentException("fisher tasks[" + t + "] has no Fisher vector for candidate layers " + missing);
      }
    }
  }

  /**
   * Static SparseUpdate: the ranking, greedy under the budget, top-K channels by weight L2 norm; with
   * {@code fisherTasks} (whichever ranking is used) the channels live on some source task
   * ({@link ChannelSelection#liveChannels}) come first, as the BN-folded norm favours dead channels, which
   * get no gradient (issue 28). Without them (a fixed list only): the plain norm order.
   */
  private static SelectedChannels sparseUpdate(LayerTable table, SelectionConfig config, List<String> candidates,
      List<Map<String, double[]>> fisherTasks, Map<String, double[]> weights) {
    List<String> names = candidates(table, candidates);
    checkFisherTasks(table, names, fisherTasks);
    List<String> chosen = greedy(table, rankSparseUpdate(table, config, names, fisherTasks, weights), config);
    Map<String, double[]> w = needWeights(table, weights, chosen);
    Map<String, int[]> channels = new LinkedHashMap<>();
    for (String name : chosen) {
      int outChannels = table.get(name).outChannels;
      channels.put(name, ChannelSelection.l2Channels(w.get(name), outChannels,
          CostModel.channelCount(outChannels, config.channelRatio),
          fisherTasks == null ? null : ChannelSelection.liveChannels(fisherTasks, name)));
    }
    return new SelectedChannels(channels, PolicyKind.SPARSE_UPDATE.wireName);
  }

  /** TinyTrain's layer ranking (before the budget) for this task's Fisher vectors. */
  public static List<String> tinyTrainRanking(LayerTable table, SelectionConfig config, List<String> names,
      Map<String, double[]> fisher, Map<String, double[]> weights) {
    if (config.criterion == Criterion.L2) {
      return LayerScoring.rankLayers(table, LayerScoring.l2LayerScores(table, needWeights(table, weights, names)));
    }
    Map<String, double[]> sub = new LinkedHashMap<>();
    for (String name : names) {
      sub.put(name, fisher.get(name));
    }
    return LayerScoring.rankLayers(table, LayerScoring.fisherScores(table, sub, config.criterion));
  }

  private static SelectedChannels tinyTrain(LayerTable table, SelectionConfig config, List<String> candidates,
      Map<String, double[]> fisher, Map<String, double[]> weights) {
    if (fisher == null) {
      throw new IllegalArgumentException("tinytrain needs fisher: layer name -> Delta vector of this task");
    }
    LayerScoring.checkFisherShapes(table, fisher);
    List<String> names = candidates(table, candidates != null ? candidates : new ArrayList<>(fisher.keySet()));
    for (String name : names) {
      if (!fisher.containsKey(name)) {
        throw new IllegalArgumentException("fisher has no Delta vector for candidate layer " + name);
      }
    }
    List<String> chosen = greedy(table, tinyTrainRanking(table, config, names, fisher, weights), config);
    Map<String, double[]> w = config.channelMethod == ChannelMethod.L2 ? needWeights(table, weights, chosen) : Map.of();
    Map<String, int[]> channels = new LinkedHashMap<>();
    for (String name : chosen) {
      int outChannels = table.get(name).outChannels;
      int k = CostModel.channelCount(outChannels, config.channelRatio);
      channels.put(name, config.channelMethod == ChannelMethod.FISHER
          ? ChannelSelection.fisherChannels(fisher.get(name), k)
          : ChannelSelection.l2Channels(w.get(name), outChannels, k));
    }
    return new SelectedChannels(channels, PolicyKind.TINYTRAIN.wireName);
  }

  /** Candidate names in forward order (null = all layers); validated, no repeats, non-empty. */
  static List<String> candidates(LayerTable table, List<String> candidates) {
    List<String> names = new ArrayList<>();
    if (candidates == null) {
      table.layers().forEach(l -> names.add(l.name));
      return names;
    }
    if (candidates.isEmpty()) {
      throw new IllegalArgumentException("candidates must not be empty");
    }
    if (new HashSet<>(candidates).size() != candidates.size()) {
      throw new IllegalArgumentException("candidates must not repeat a layer; got " + candidates);
    }
    names.addAll(candidates);
    names.sort((a, b) -> Integer.compare(table.indexOf(a), table.indexOf(b)));
    return names;
  }

  private static List<String> greedy(LayerTable table, List<String> ranking, SelectionConfig config) {
    List<String> chosen = new ArrayList<>(GreedyLayerSelection.select(table, ranking, config.budget,
        config.channelRatio, config.optimizer, config.batchSize, config.gradientBuffer, config.onEmpty));
    chosen.sort((a, b) -> Integer.compare(table.indexOf(a), table.indexOf(b)));
    return chosen;
  }

  private static Map<String, int[]> allChannels(LayerTable table, List<String> names) {
    Map<String, int[]> out = new LinkedHashMap<>();
    for (String name : names) {
      int[] all = new int[table.get(name).outChannels];
      for (int i = 0; i < all.length; i++) {
        all[i] = i;
      }
      out.put(name, all);
    }
    return out;
  }

  private static Map<String, double[]> needWeights(LayerTable table, Map<String, double[]> weights, List<String> names) {
    if (names.isEmpty()) {
      return Map.of();
    }
    if (weights == null) {
      throw new IllegalArgumentException("weights are needed (L2 norms) for layers " + names + "; got null");
    }
    Map<String, double[]> out = new LinkedHashMap<>();
    for (String name : names) {
      if (!weights.containsKey(name)) {
        throw new IllegalArgumentException("weights has no array for layer " + name);
      }
      out.put(name, LayerScoring.checkLayerWeights(table, name, weights.get(name)));
    }
    return out;
  }
}
