package org.tflitetrain.core.select;

import java.math.BigDecimal;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Fisher potential of a layer (TinyTrain §4, after Eq. 2); port of {@code tflite_train/sparse/fisher.py}.
 *
 * <p>With Delta_o the Fisher information of output channel o (Eq. 2, the {@code fisher} signature's
 * output), the potential is P = sum_o Delta_o. The sum uses numpy's pairwise summation (blocks of 128,
 * eight accumulators), as {@code np.sum} does on a float64 vector, so Java and Python give the same
 * double; the mean over tasks P_bar_l = 1/T sum_t P_{t,l} is an exactly rounded sum (Python
 * {@code math.fsum}) divided by T.
 */
public final class FisherPotential {
  private static final int BLOCK = 128;

  private FisherPotential() {}

  /**
   * P = sum_o Delta_o.
   *
   * @throws IllegalArgumentException for an empty vector or a negative / non-finite entry
   */
  public static double potential(double[] delta) {
    checkVector(delta, "delta");
    return pairwiseSum(delta, 0, delta.length);
  }

  /** P_l of every layer, in the map's iteration order. */
  public static Map<String, Double> potentials(Map<String, double[]> fisher) {
    if (fisher == null) {
      throw new IllegalArgumentException("fisher must be a map of layer name -> Delta vector; got null");
    }
    Map<String, Double> out = new LinkedHashMap<>();
    for (Map.Entry<String, double[]> entry : fisher.entrySet()) {
      checkVector(entry.getValue(), "fisher[" + entry.getKey() + "]");
      out.put(entry.getKey(), pairwiseSum(entry.getValue(), 0, entry.getValue().length));
    }
    return out;
  }

  /**
   * P_bar_l = (sum_t P_{t,l}) / T over tasks that all name the same layers (SparseUpdate's offline ranking).
   *
   * @throws IllegalArgumentException no tasks, or tasks naming different layers
   */
  public static Map<String, Double> meanPotentials(List<Map<String, double[]>> tasks) {
    if (tasks == null || tasks.isEmpty()) {
      throw new IllegalArgumentException("fisher tasks must be a non-empty list of Fisher maps; got " + tasks);
    }
    Map<String, Double> first = potentials(tasks.get(0));
    Map<String, BigDecimal> sums = new LinkedHashMap<>();
    first.forEach((name, p) -> sums.put(name, new BigDecimal(p)));
    for (int t = 1; t < tasks.size(); t++) {
      Map<String, Double> task = potentials(tasks.get(t));
      if (!task.keySet().equals(first.keySet())) {
        throw new IllegalArgumentException("fisher tasks[" + t + "] names layers " + task.keySet()
            + " but tasks[0] names " + first.keySet());
      }
      task.forEach((name, p) -> sums.put(name, sums.get(name).add(new BigDecimal(p))));
    }
    Map<String, Double> out = new LinkedHashMap<>();
    sums.forEach((name, sum) -> out.put(name, sum.doubleValue() / tasks.size()));
    return out;
  }

  /** numpy's {@code pairwise_sum} for float64 (n < 8: sequential; n <= 128: 8 accumulators; else split). */
  static double pairwiseSum(double[] a, int start, int n) {
    if (n < 8) {
      double res = 0.0;
      for (int i = 0; i < n; i++) {
        res += a[start + i];
      }
      return res;
    } else if (n <= BLOCK) {
      double[] r = new double[8];
      for (int j = 0; j < 8; j++) {
        r[j] = a[start + j];
      }
      int i;
      for (i = 8; i < n - (n % 8); i += 8) {
        for (int j = 0; j < 8; j++) {
          r[j] += a[start + i + j];
        }
      }
      double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
      for (; i < n; i++) {
        res += a[start + i];
      }
      return res;
    } else {
      int n2 = n / 2;
      n2 -= n2 % 8;
      return pairwiseSum(a, start, n2) + pairwiseSum(a, start + n2, n - n2);
    }
  }

  /** A Fisher (or other importance) vector: non-empty, finite, >= 0. */
  static void checkVector(double[] vector, String argument) {
    if (vector == null || vector.length == 0) {
      throw new IllegalArgumentException(argument + " must be a non-empty vector; got "
          + (vector == null ? "null" : "length 0"));
    }
    for (double v : vector) {
      if (!Double.isFinite(v)) {
        throw new IllegalArgumentException(argument + " must be finite; got " + v);
      }
      if (v < 0) {
        throw new IllegalArgumentException(argument + " must be >= 0 (a sum of squares); got " + v);
      }
    }
  }
}
