package org.tflitetrain.core.adapt;

import java.util.List;
import org.tflitetrain.core.cost.BackwardCost;
import org.tflitetrain.core.select.Budget;

/**
 * What an adaptation chose and measured: selection, its analytic cost (at the rows one train-step call held),
 * budget use, loss curve (the final run's updates, after those of the rate choice), whether the steps ran from
 * the cached cut ({@link #cache}), how the updates ran ({@link #updates}) and the rate choice.
 */
public final class AdaptationResult {
  public final String policy;
  public final Selection selection;
  public final BackwardCost cost;
  public final Budget budget;
  /** The budget's compute limit in MACs for this model (+inf = unlimited). */
  public final double computeLimitMacs;
  public final int batchSize;
  public final List<Float> losses;
  public final List<Float> accuracies;
  /** The cached cut decision: used or not (and why), its cut and bytes. */
  public final CachePlan cache;
  /** How the updates ran (prototypes, batch or accumulation, rows per call, what was reduced); null without training. */
  public final UpdatePlan updates;
  /** The per-task learning-rate choice; null when the config fixes the rate (or nothing was trained). */
  public final RateChoice rateChoice;

  AdaptationResult(String policy, Selection selection, BackwardCost cost, Budget budget, double computeLimitMacs, int batchSize,
      List<Float> losses, List<Float> accuracies, CachePlan cache, UpdatePlan updates, RateChoice rateChoice) {
    this.policy = policy;
    this.selection = selection;
    this.cost = cost;
    this.budget = budget;
    this.computeLimitMacs = computeLimitMacs;
    this.batchSize = batchSize;
    this.losses = List.copyOf(losses);
    this.accuracies = List.copyOf(accuracies);
    this.cache = cache;
    this.updates = updates;
    this.rateChoice = rateChoice;
  }

  /** Backward memory / memory budget (0 when unlimited). */
  public double memoryUse() {
    return (double) cost.totalBytes() / budget.memoryBytes;
  }

  /** Backward MACs / compute budget (0 when unlimited). */
  public double computeUse() {
    return (double) cost.backwardMacs() / computeLimitMacs;
  }
}
