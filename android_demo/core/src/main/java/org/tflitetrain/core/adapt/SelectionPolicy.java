package org.tflitetrain.core.adapt;

import java.util.List;
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

  /**
   * The selection among {@code candidates} only (a continued run with a replay memory: the layers at or above its
   * cut, {@link Continuation#candidates}). By default {@link #select(ModelMetadata, FisherScores, Budget, int)},
   * refused when it names another layer; {@link ConfiguredPolicy} selects among them.
   *
   * @throws IllegalArgumentException the selection names a layer outside {@code candidates}
   */
  default Selection select(ModelMetadata metadata, FisherScores fisher, Budget budget, int batchSize,
      List<String> candidates) {
    Selection selection = select(metadata, fisher, budget, batchSize);
    for (String layer : selection.channels().keySet()) {
      if (!candidates.contains(layer)) {
        throw new IllegalArgumentException("policy " + name() + " selected " + layer + ", which this run may not "
            + "update (the replay memory's activations come from it); allowed: " + candidates);
      }
    }
    return selection;
  }

  /** Short name shown in the UI and logs. */
  String name();
}
