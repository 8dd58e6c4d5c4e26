package org.tflitetrain.core.adapt;

import org.tflitetrain.core.model.ModelMetadata;

/** Updates every channel of every candidate layer, ignoring scores and budget (the dense baseline). */
public final class AllCandidatesPolicy implements SelectionPolicy {
  @Override
  public Selection select(ModelMetadata metadata, FisherScores fisher, Budget budget, int batchSize) {
    return Selection.fullLayers(metadata, metadata.candidates);
  }

  @Override
  public String name() {
    return "all-candidates";
  }
}
