package org.tflitetrain.core.select;

import java.util.Arrays;

/**
 * Output-channel selection inside a selected layer; port of {@code sparse/channel_selection.py}.
 *
 * <p>TinyTrain keeps the K channels with the largest Fisher information,
 * C_sel = argmax_{|C'| = K} sum_{c in C'} Delta_c (top-K); the static ablation / SparseUpdate uses the
 * L2 norm of each output channel's weights instead. Results are sorted ascending; equal values are
 * broken by the lower channel index first. (Python's random-channel ablation is not ported.)
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
    Integer[] order = new Integer[values.length];
    for (int i = 0; i < order.length; i++) {
      order[i] = i;
    }
    Arrays.sort(order, (a, b) -> {
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

  /** Top-K output channels by weight L2 norm (output channel last). */
  public static int[] l2Channels(double[] weights, int outChannels, int k) {
    return topK(channelL2Norms(weights, outChannels), k);
  }
}
