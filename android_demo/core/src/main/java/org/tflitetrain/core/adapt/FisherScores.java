package org.tflitetrain.core.adapt;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.tflitetrain.core.model.ModelMetadata;

/**
 * Per-channel Fisher information of the candidate layers, as the {@code fisher} signature returns it:
 * Delta_o = 1/(2N) sum_n (sum_{h,w} a_nhwo g_nhwo)^2 (TinyTrain eq. 4), one f32[C_out] per layer.
 */
public final class FisherScores {
  private final Map<String, float[]> scores;

  /** @throws IllegalArgumentException when a candidate is missing or has the wrong length */
  public FisherScores(ModelMetadata metadata, Map<String, float[]> scores) {
    Map<String, float[]> ordered = new LinkedHashMap<>();
    for (String name : metadata.candidates) {
      float[] values = scores.get(name);
      if (values == null) {
        throw new IllegalArgumentException("fisher scores lack candidate layer " + name);
      }
      int expected = metadata.candidate(name).outChannels;
      if (values.length != expected) {
        throw new IllegalArgumentException("fisher scores of " + name + " must have " + expected
            + " entries; got " + values.length);
      }
      ordered.put(name, values.clone());
    }
    this.scores = Collections.unmodifiableMap(ordered);
  }

  /** A copy of one layer's per-channel scores. */
  public float[] layer(String name) {
    float[] values = scores.get(name);
    if (values == null) {
      throw new IllegalArgumentException("no fisher scores for layer " + name);
    }
    return values.clone();
  }

  /** Candidate layer names in forward order. */
  public Iterable<String> layers() {
    return scores.keySet();
  }
}
