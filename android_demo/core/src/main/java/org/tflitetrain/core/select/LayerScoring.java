package org.tflitetrain.core.select;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.cost.LayerCost;
import org.tflitetrain.core.cost.LayerSpec;
import org.tflitetrain.core.cost.LayerTable;

/**
 * Layer scores and ranking; port of {@code sparse/scoring.py}. With P_i the Fisher potential, |W_i|
 * the weight count and M_i the forward MACs of layer i, and maxima over ALL layers of the table:
 *
 * <pre>
 *   tinytrain       s_i = P_i / ((|W_i| / max|W|) * (M_i / max M))     (Eq. 3)
 *   fisher          s_i = P_i
 *   fisher_memory   s_i = P_i / (|W_i| / max|W|)
 *   fisher_compute  s_i = P_i / (M_i / max M)
 *   l2              s_i = ||W_i||_2
 * </pre>
 *
 * Ranking: highest score first; equal scores -> deeper layer (larger index) first.
 */
public final class LayerScoring {
  private LayerScoring() {}

  /**
   * Scores of the layers in {@code potentials} (same iteration order).
   *
   * @throws IllegalArgumentException L2 criterion, unknown layer, negative / non-finite potential
   */
  public static Map<String, Double> multiObjectiveScores(LayerTable table, Map<String, Double> potentials,
      Criterion criterion) {
    if (criterion == null || criterion == Criterion.L2) {
      throw new IllegalArgumentException("criterion must be a Fisher criterion; got " + criterion);
    }
    long maxWeights = 0;
    long maxMacs = 0;
    for (LayerSpec layer : table.layers()) {
      LayerCost cost = CostModel.layerCost(layer);
      maxWeights = Math.max(maxWeights, cost.weights);
      maxMacs = Math.max(maxMacs, cost.forwardMacs);
    }
    Map<String, Double> scores = new LinkedHashMap<>();
    for (Map.Entry<String, Double> entry : potentials.entrySet()) {
      Double potential = entry.getValue();
      if (potential == null || !Double.isFinite(potential) || potential < 0) {
        throw new IllegalArgumentException("potentials[" + entry.getKey() + "] must be finite and >= 0; got " + potential);
      }
      LayerCost cost = CostModel.layerCost(table.get(entry.getKey()));
      double memory = (double) cost.weights / (double) maxWeights;
      double compute = (double) cost.forwardMacs / (double) maxMacs;
      double divisor;
      switch (criterion) {
        case TINYTRAIN:
          divisor = memory * compute;
          break;
        case FISHER_MEMORY:
          divisor = memory;
          break;
        case FISHER_COMPUTE:
          divisor = compute;
          break;
        default:
          divisor = 1.0;
      }
      scores.put(entry.getKey(), potential / divisor);
    }
    return scores;
  }

  /** Scores from per-layer Fisher vectors (checks each has C_out entries). */
  public static Map<String, Double> fisherScores(LayerTable table, Map<String, double[]> fisher, Criterion criterion) {
    checkFisherShapes(table, fisher);
    return multiObjectiveScores(table, FisherPotential.potentials(fisher), criterion);
  }

  /**
   * s_i = ||W_i||_2 = sqrt(sum of squared weights).
   *
   * @param weights layer name -> fan_in * C_out weights (any layout; biases excluded)
   */
  public static Map<String, Double> l2LayerScores(LayerTable table, Map<String, double[]> weights) {
    Map<String, Double> scores = new LinkedHashMap<>();
    for (Map.Entry<String, double[]> entry : weights.entrySet()) {
      double[] w = checkLayerWeights(table, entry.getKey(), entry.getValue());
      double[] squares = new double[w.length];
      for (int i = 0; i < w.length; i++) {
        squares[i] = w[i] * w[i];
      }
      scores.put(entry.getKey(), Math.sqrt(FisherPotential.pairwiseSum(squares, 0, squares.length)));
    }
    return scores;
  }

  /** Layer names by score, highest first; ties -> deeper layer first. */
  public static List<String> rankLayers(LayerTable table, Map<String, Double> scores) {
    List<String> names = new ArrayList<>();
    for (Map.Entry<String, Double> entry : scores.entrySet()) {
      if (entry.getValue() == null || !Double.isFinite(entry.getValue())) {
        throw new IllegalArgumentException("scores[" + entry.getKey() + "] must be a finite number; got " + entry.getValue());
      }
      table.indexOf(entry.getKey());
      names.add(entry.getKey());
    }
    names.sort((a, b) -> {
      double sa = scores.get(a);
      double sb = scores.get(b);
      if (sa > sb) {
        return -1;
      }
      if (sa < sb) {
        return 1;
      }
      return Integer.compare(table.indexOf(b), table.indexOf(a));
    });
    return names;
  }

  /** Each Fisher vector names a layer of the table and has C_out entries. */
  public static void checkFisherShapes(LayerTable table, Map<String, double[]> fisher) {
    if (fisher == null) {
      throw new IllegalArgumentException("fisher must be a map of layer name -> Delta vector; got null");
    }
    for (Map.Entry<String, double[]> entry : fisher.entrySet()) {
      int expected = table.get(entry.getKey()).outChannels;
      double[] delta = entry.getValue();
      if (delta == null || delta.length != expected) {
        throw new IllegalArgumentException("fisher[" + entry.getKey() + "] must have " + expected
            + " (C_out) entries; got " + (delta == null ? "null" : delta.length));
      }
    }
  }

  /** One layer's weights: fan_in * C_out finite values. */
  static double[] checkLayerWeights(LayerTable table, String name, double[] weights) {
    LayerSpec layer = table.get(name);
    long expected = layer.fanIn() * layer.outChannels;
    if (weights == null || weights.length != expected) {
      throw new IllegalArgumentException("weights[" + name + "] must hold fan_in * C_out = " + expected
          + " values; got " + (weights == null ? "null" : weights.length));
    }
    for (double v : weights) {
      if (!Double.isFinite(v)) {
        throw new IllegalArgumentException("weights[" + name + "] must be finite; got " + v);
      }
    }
    return weights;
  }
}
