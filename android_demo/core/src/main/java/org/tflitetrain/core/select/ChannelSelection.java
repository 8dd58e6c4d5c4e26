package org.tflitetrain.core.select;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * Output-channel selection inside a selected layer; port of {@code sparse/channel_selection.py}.
 *
 * <p>TinyTrain keeps the K channels with the largest Fisher information,
 * C_sel = argmax_{|C'| = K} sum_{c in C'} Delta_c (top-K); the static ablation / SparseUpdate uses the
 * L2 norm of each output channel's weights instead. Results are sorted ascending; equal values are
 * broken by the lower channel index first. (Python's random-channel ablation is not ported.)
 *
 * <p>Weight magnitude and dead channels ({@link #l2Channels(double[], int, int, boolean[])}): an exported
 * kernel has its BatchNorm folded in, W'_o = W_o gamma_o / sqrt(var_o + eps), so a channel whose BN
 * variance was tiny (typically one with a dead input: constant output) gets a large norm but no
 * gradient. SparseUpdate therefore ranks the channels live on some source task
 * ({@link #liveChannels(List, String)}: a non-zero Fisher information) first, the norm ordering each
 * group (issue 28).
 */
public final class ChannelSelection {
  private ChannelSelection() {}

  /**
   * Indices of the {@code k} largest values, ties -> lower index first, sorted ascending.
   *
   * @throws IllegalArgumentException bad vector (empty, negative, non-finite) or k outside 1..length
   */
  public static int[] topK(double[] values, int k) {
    FisherPotential.checkVector(values, "values");
    if (k < 1 || k > values.length) {
      throw new IllegalArgumentException("k must be an int in 1.." + values.length + "; got " + k);
    }
    return firstK(values, null, k);
  }

  /**
   * The first {@code k} indices in the order: live first (when {@code live} is given), then larger
   * value first, then lower index first; returned sorted ascending. Inputs are checked by the callers.
   */
  private static int[] firstK(double[] values, boolean[] live, int k) {
    Integer[] order = new Integer[values.length];
    for (int i = 0; i < order.length; i++) {
      order[i] = i;
    }
    Arrays.sort(order, (a, b) -> {
      if (live != null && live[a] != live[b]) {
        return live[a] ? -1 : 1;
      }
      if (values[a] > values[b]) {
        return -1;
      }
      if (values[a] < values[b]) {
        return 1;
      }
      return Integer.compare(a, b);
    });
    int[] chosen = new int[k];
    for (int i = 0; i < k; i++) {
      chosen[i] = order[i];
    }
    Arrays.sort(chosen);
    return chosen;
  }

  /** TinyTrain's dynamic channel selection: top-K output channels by Delta_o. */
  public static int[] fisherChannels(double[] delta, int k) {
    return topK(delta, k);
  }

  /**
   * n_o = sqrt(sum_i W[i, o]^2) for weights laid out with the output channel last (flat row-major
   * (fan_in, C_out)); the rows are added in order, as numpy's axis-0 sum does.
   */
  public static double[] channelL2Norms(double[] weights, int outChannels) {
    if (weights == null || outChannels < 1 || weights.length == 0 || weights.length % outChannels != 0) {
      throw new IllegalArgumentException("weights must be a non-empty multiple of outChannels=" + outChannels
          + " values with the output channel last; got " + (weights == null ? "null" : weights.length));
    }
    double[] sums = new double[outChannels];
    for (int i = 0; i < weights.length; i++) {
      double w = weights[i];
      if (!Double.isFinite(w)) {
        throw new IllegalArgumentException("weights must be finite; got " + w);
      }
      sums[i % outChannels] += w * w;
    }
    for (int o = 0; o < outChannels; o++) {
      sums[o] = Math.sqrt(sums[o]);
    }
    return sums;
  }

  /** Top-K output channels by weight L2 norm (output channel last); the plain magnitude order. */
  public static int[] l2Channels(double[] weights, int outChannels, int k) {
    return l2Channels(weights, outChannels, k, null);
  }

  /**
   * Top-K output channels by weight L2 norm (output channel last), the live channels first.
   *
   * <p>With {@code live} (true where the channel can receive a gradient, see {@link #liveChannels}), the
   * live channels come first and the dead ones after, each group by decreasing norm (ties -> lower index
   * first): dead channels are chosen only when fewer than {@code k} are live. Sorted ascending.
   *
   * @param live null = the plain magnitude order; else one entry per output channel
   * @throws IllegalArgumentException bad weights, {@code live} of the wrong length, k outside 1..outChannels
   */
  public static int[] l2Channels(double[] weights, int outChannels, int k, boolean[] live) {
    double[] norms = channelL2Norms(weights, outChannels);
    if (live == null) {
      return topK(norms, k);
    }
    if (live.length != norms.length) {
      throw new IllegalArgumentException("live must have one entry per output channel (" + norms.length + "); got "
          + live.length);
    }
    if (k < 1 || k > norms.length) {
      throw new IllegalArgumentException("k must be an int in 1.." + norms.length + "; got " + k);
    }
    return firstK(norms, live, k);
  }

  /**
   * True where layer {@code name} has a non-zero Fisher information Delta_o on at least one of
   * {@code tasks} (per-task maps layer -> Delta vector, e.g. meta-training tasks); port of
   * {@code live_channels}.
   *
   * <p>Delta_o = 1/(2N) sum_n (sum_d a g)^2 is exactly 0 when the channel's activation or its gradient
   * is 0 on every sample (a ReLU/ReLU6 channel that is always off or always saturated): such a channel's
   * weights get no gradient from those samples.
   *
   * @throws IllegalArgumentException no tasks, a task without {@code name}, vectors of different lengths
   *     or invalid values (empty, negative, non-finite)
   */
  public static boolean[] liveChannels(List<Map<String, double[]>> tasks, String name) {
    if (tasks == null || tasks.isEmpty()) {
      throw new IllegalArgumentException("fisher tasks must not be empty; got " + tasks);
    }
    boolean[] live = null;
    for (int t = 0; t < tasks.size(); t++) {
      Map<String, double[]> task = tasks.get(t);
      if (task == null || !task.containsKey(name)) {
        throw new IllegalArgumentException("fisher tasks[" + t + "] has no Fisher vector for layer " + name);
      }
      double[] delta = task.get(name);
      FisherPotential.checkVector(delta, "fisher tasks[" + t + "][" + name + "]");
      if (live == null) {
        live = new boolean[delta.length];
      } else if (delta.length != live.length) {
        throw new IllegalArgumentException("fisher tasks have Fisher vectors of different lengths for layer " + name
            + " (" + live.length + " and " + delta.length + ")");
      }
      for (int o = 0; o < delta.length; o++) {
        live[o] |= delta[o] > 0.0;
      }
    }
    return live;
  }
}
