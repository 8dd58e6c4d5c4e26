package org.tflitetrain.core.cost;

/**
 * Memory (bytes) and compute (MACs per sample) of one backward pass; mirrors Python's
 * {@code BackwardCost}. activationBytes = max(inferenceActivationBytes, reluMaskBytes + savedInputBytes).
 */
public final class BackwardCost {
  /** The cost of no backward pass at all (empty selection). */
  public static final BackwardCost NONE = new BackwardCost(0, 0, 0, 0, 0, 0, 0, 0, 0, null);

  public final long updatedParams;
  public final long updatedWeightBytes;
  public final long optimizerBytes;
  public final long savedInputBytes;
  public final long reluMaskBytes;
  public final long inferenceActivationBytes;
  public final long activationBytes;
  public final long inputGradMacs;
  public final long weightGradMacs;
  /** Index of the deepest (first in forward order) updated layer; null when nothing is updated. */
  public final Integer deepestLayer;

  BackwardCost(long updatedParams, long updatedWeightBytes, long optimizerBytes, long savedInputBytes,
      long reluMaskBytes, long inferenceActivationBytes, long activationBytes, long inputGradMacs,
      long weightGradMacs, Integer deepestLayer) {
    this.updatedParams = updatedParams;
    this.updatedWeightBytes = updatedWeightBytes;
    this.optimizerBytes = optimizerBytes;
    this.savedInputBytes = savedInputBytes;
    this.reluMaskBytes = reluMaskBytes;
    this.inferenceActivationBytes = inferenceActivationBytes;
    this.activationBytes = activationBytes;
    this.inputGradMacs = inputGradMacs;
    this.weightGradMacs = weightGradMacs;
    this.deepestLayer = deepestLayer;
  }

  /** B1 + B2 + activations: the paper's backward-pass memory. */
  public long totalBytes() {
    return updatedWeightBytes + optimizerBytes + activationBytes;
  }

  /** Input-gradient plus weight-gradient MACs. */
  public long backwardMacs() {
    return inputGradMacs + weightGradMacs;
  }

  @Override
  public String toString() {
    return "BackwardCost(total_bytes=" + totalBytes() + ", weights=" + updatedWeightBytes + ", optimizer="
        + optimizerBytes + ", activations=" + activationBytes + ", backward_macs=" + backwardMacs()
        + ", deepest=" + deepestLayer + ")";
  }
}
