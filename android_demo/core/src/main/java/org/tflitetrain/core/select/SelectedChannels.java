package org.tflitetrain.core.select;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.tflitetrain.core.cost.BackwardCost;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.cost.LayerTable;
import org.tflitetrain.core.cost.Optimizer;

/**
 * A policy's result as plain data (port of Python's {@code sparse.selection.Selection}): selected layers
 * in forward order, each with its output channels sorted ascending, and the policy's name. Empty = "no
 * update". {@code org.tflitetrain.core.adapt.Selection} is the metadata-bound form the driver uses.
 */
public final class SelectedChannels {
  private final Map<String, int[]> channels;
  public final String policy;

  /** @param channels layer -> sorted, unique, non-empty channel indices, in forward order */
  public SelectedChannels(Map<String, int[]> channels, String policy) {
    Map<String, int[]> copy = new LinkedHashMap<>();
    channels.forEach((name, values) -> {
      if (values.length == 0) {
        throw new IllegalArgumentException("channels[" + name + "] must not be empty (drop the layer instead)");
      }
      for (int i = 0; i < values.length; i++) {
        if (values[i] < 0 || (i > 0 && values[i] <= values[i - 1])) {
          throw new IllegalArgumentException("channels[" + name + "] must be sorted, unique and >= 0");
        }
      }
      copy.put(name, values.clone());
    });
    this.channels = Collections.unmodifiableMap(copy);
    this.policy = policy;
  }

  /** Selected layer names (forward order). */
  public List<String> layers() {
    return List.copyOf(channels.keySet());
  }

  /** A copy of one layer's channels. */
  public int[] channels(String layer) {
    int[] values = channels.get(layer);
    if (values == null) {
      throw new IllegalArgumentException("layer " + layer + " is not selected; selected: " + channels.keySet());
    }
    return values.clone();
  }

  /** Layer -> channels (copies), forward order. */
  public Map<String, int[]> channelMap() {
    Map<String, int[]> copy = new LinkedHashMap<>();
    channels.forEach((k, v) -> copy.put(k, v.clone()));
    return copy;
  }

  public boolean isEmpty() {
    return channels.isEmpty();
  }

  /** Layer -> K, the cost model's input. */
  public Map<String, Integer> channelCounts() {
    Map<String, Integer> counts = new LinkedHashMap<>();
    channels.forEach((k, v) -> counts.put(k, v.length));
    return counts;
  }

  /** Backward-pass memory and compute of this selection. */
  public BackwardCost cost(LayerTable table, Optimizer optimizer, int batchSize, boolean gradientBuffer) {
    return CostModel.backwardCostByName(table, channelCounts(), optimizer, batchSize, gradientBuffer);
  }

  /**
   * The {@code set_selection} mask: f32[S], S = sum of C_out over {@code candidates} (in that order),
   * 1.0 at each selected channel.
   *
   * @throws IllegalArgumentException a selected layer is not a candidate or a channel index >= C_out
   */
  public float[] channelMask(LayerTable table, List<String> candidates) {
    int length = 0;
    for (String name : candidates) {
      length += table.get(name).outChannels;
    }
    for (String name : channels.keySet()) {
      if (!candidates.contains(name)) {
        throw new IllegalArgumentException("selected layer " + name + " is not a candidate " + candidates);
      }
    }
    float[] mask = new float[length];
    int offset = 0;
    for (String name : candidates) {
      int width = table.get(name).outChannels;
      int[] selected = channels.get(name);
      if (selected != null) {
        for (int c : selected) {
          if (c >= width) {
            throw new IllegalArgumentException("channels[" + name + "] has index " + c + " >= C_out = " + width);
          }
          mask[offset + c] = 1.0f;
        }
      }
      offset += width;
    }
    return mask;
  }

  @Override
  public String toString() {
    StringBuilder out = new StringBuilder(policy).append('{');
    channels.forEach((k, v) -> out.append(k).append(':').append(v.length).append(' '));
    return out.toString().trim() + "}";
  }
}
