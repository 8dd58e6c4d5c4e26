package org.tflitetrain.core.cost;

import java.util.Arrays;

/** Optimizers of the cost model with their state slots per updated weight (Python {@code OPTIMIZER_SLOTS}). */
public enum Optimizer {
  ADAM("adam", 2),
  SGD_MOMENTUM("sgd_momentum", 1),
  SGD("sgd", 0);

  /** The name used in Python and in the model metadata. */
  public final String wireName;
  /** Optimizer state tensors per updated weight: Adam keeps m and v, SGD with momentum keeps one. */
  public final int slots;

  Optimizer(String wireName, int slots) {
    this.wireName = wireName;
    this.slots = slots;
  }

  /** @throws IllegalArgumentException for an unknown name */
  public static Optimizer fromName(String name) {
    for (Optimizer optimizer : values()) {
      if (optimizer.wireName.equals(name)) {
        return optimizer;
      }
    }
    throw new IllegalArgumentException("optimizer must be one of "
        + Arrays.toString(Arrays.stream(values()).map(o -> o.wireName).toArray()) + "; got " + name);
  }
}
