package org.tflitetrain.core.adapt;

import org.tflitetrain.core.model.ModelMetadata;
import org.tflitetrain.core.select.Budget;

/**
 * Chooses layers and channels to update from the Fisher scores under a budget (TinyTrain §4).
 * {@link ConfiguredPolicy} runs the Java port of the Python policies (TinyTrain, SparseUpdate, and the
 * none / last_layer / full_train baselines); {@link FixedSelectionPolicy} replays a fixed selection.
 */
public interface SelectionPolicy {
  /**
   * @param metadata the model (layer table, candidates, optimizer)
   * @param fisher per-channel Fisher scores of every candidate
   * @param budget memory/compute limits of one backward pass at {@code batchSize}
   * @param batchSize samples per train_step
   * @return the selection; empty means "no update" (the driver then skips training)
   */
  Selection select(ModelMetadata metadata, FisherScores fisher, Budget budget, int batchSize);

  /** Short name shown in the UI and logs. */
  String name();
}
