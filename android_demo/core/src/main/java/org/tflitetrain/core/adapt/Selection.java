package org.tflitetrain.core.adapt;

import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.tflitetrain.core.cost.LayerSpec;
import org.tflitetrain.core.model.ModelMetadata;

/** Which output channels of which candidate layers to update; layers not named are frozen. */
public final class Selection {
  private final Map<String, int[]> channels;

  /**
   * @param channels candidate layer name -> output-channel indices (any order, no duplicates, non-empty)
   * @throws IllegalArgumentException for a non-candidate layer or a channel out of range
   */
  public Selection(ModelMetadata metadata, Map<String, int[]> channels) {
    Map<String, int[]> ordered = new LinkedHashMap<>();
    for (String name : metadata.candidates) {
      int[] selected = channels.get(name);
      if (selected == null) {
        continue;
      }
      LayerSpec layer = metadata.candidate(name);
      int[] sorted = selected.clone();
      Arrays.sort(sorted);
      if (sorted.length == 0) {
        throw new IllegalArgumentException("layer " + name + " is named with no channels; leave it out instead");
      }
      for (int i = 0; i < sorted.length; i++) {
        if (sorted[i] < 0 || sorted[i] >= layer.outChannels || (i > 0 && sorted[i] == sorted[i - 1])) {
          throw new IllegalArgumentException("channels of layer " + name + " must be distinct indices in 0.."
              + (layer.outChannels - 1) + "; got " + Arrays.toString(selected));
        }
      }
      ordered.put(name, sorted);
    }
    for (String name : channels.keySet()) {
      metadata.maskOffset(name); // throws for non-candidates
    }
    this.channels = Collections.unmodifiableMap(ordered);
  }

  /** Every channel of the named layers. */
  public static Selection fullLayers(ModelMetadata metadata, Iterable<String> layers) {
    Map<String, int[]> channels = new LinkedHashMap<>();
    for (String name : layers) {
      int count = metadata.candidate(name).outChannels;
      int[] all = new int[count];
      for (int i = 0; i < count; i++) {
        all[i] = i;
      }
      channels.put(name, all);
    }
    return new Selection(metadata, channels);
  }

  /** Selected layers (candidate order) -> sorted channel indices. */
  public Map<String, int[]> channels() {
    Map<String, int[]> copy = new LinkedHashMap<>();
    channels.forEach((k, v) -> copy.put(k, v.clone()));
    return copy;
  }

  /** Selected layers -> number of channels K, the cost model's input. */
  public Map<String, Integer> channelCounts() {
    Map<String, Integer> counts = new LinkedHashMap<>();
    channels.forEach((k, v) -> counts.put(k, v.length));
    return counts;
  }

  public boolean isEmpty() {
    return channels.isEmpty();
  }

  /** The {@code set_selection} mask: f32[S], 1.0 at each selected channel, candidates concatenated in order. */
  public float[] toMask(ModelMetadata metadata) {
    float[] mask = new float[metadata.maskLength()];
    channels.forEach((name, selected) -> {
      int offset = metadata.maskOffset(name);
      for (int c : selected) {
        mask[offset + c] = 1.0f;
      }
    });
    return mask;
  }

  @Override
  public String toString() {
    StringBuilder out = new StringBuilder("Selection{");
    channels.forEach((k, v) -> out.append(k).append(':').append(v.length).append(' '));
    return out.toString().trim() + "}";
  }
}
