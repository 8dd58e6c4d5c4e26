package org.tflitetrain.core.adapt;

import org.tflitetrain.core.model.ModelMetadata;

/**
 * Chooses layers and channels to update from the Fisher scores under a budget (TinyTrain §3.3).
 * The budgeted Fisher-per-cost policy (greedy layers, top-K channels) is ported from the Python
 * selection module in the second round; {@link AllCandidatesPolicy} and {@link FixedSelectionPolicy}
 * are the baselines.
 */
public interface SelectionPolicy {
  /**
   * @param metadata the model (layer table, candidates, optimizer)
   * @param fisher per-channel Fisher scores of every candidate
   * @param budget memory/compute limits of one backward pass at {@code batchSize}
   * @param batchSize samples per train_step
   * @return a non-empty selection
   */
  Selection select(ModelMetadata metadata, FisherScores fisher, Budget budget, int batchSize);

  /** Short name shown in the UI and logs. */
  String name();
}
