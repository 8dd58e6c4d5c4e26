package org.tflitetrain.core.adapt;

import org.tflitetrain.core.model.ModelMetadata;
import org.tflitetrain.core.select.Budget;

/** Always returns the same selection (e.g. LastLayer, or one computed offline). */
public final class FixedSelectionPolicy implements SelectionPolicy {
  private final Selection selection;
  private final String name;

  public FixedSelectionPolicy(String name, Selection selection) {
    if (selection == null || selection.isEmpty()) {
      throw new IllegalArgumentException("selection must be non-empty; got " + selection);
    }
    this.name = name;
    this.selection = selection;
  }

  /** All channels of the last candidate layer. */
  public static FixedSelectionPolicy lastLayer(ModelMetadata metadata) {
    String last = metadata.candidates.get(metadata.candidates.size() - 1);
    return new FixedSelectionPolicy("last-layer", Selection.fullLayers(metadata, java.util.List.of(last)));
  }

  @Override
  public Selection select(ModelMetadata metadata, FisherScores fisher, Budget budget, int batchSize) {
    return selection;
  }

  @Override
  public String name() {
    return name;
  }
}
