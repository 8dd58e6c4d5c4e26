package org.tflitetrain.core.adapt;

/** Resource limits of one backward pass: memory in bytes and compute in MACs per sample. */
public final class Budget {
  public final long memoryBytes;
  public final long backwardMacs;

  /** @throws IllegalArgumentException for a non-positive limit */
  public Budget(long memoryBytes, long backwardMacs) {
    if (memoryBytes <= 0 || backwardMacs <= 0) {
      throw new IllegalArgumentException("budget limits must be positive; got memoryBytes=" + memoryBytes
          + " backwardMacs=" + backwardMacs);
    }
    this.memoryBytes = memoryBytes;
    this.backwardMacs = backwardMacs;
  }

  @Override
  public String toString() {
    return "Budget(" + memoryBytes + " B, " + backwardMacs + " MACs)";
  }
}
