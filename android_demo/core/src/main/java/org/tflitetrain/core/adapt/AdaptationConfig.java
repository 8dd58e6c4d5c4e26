package org.tflitetrain.core.adapt;

import java.util.OptionalLong;
import org.tflitetrain.core.select.Budget;

/** Settings of one adaptation run (immutable; build with {@link Builder}). */
public final class AdaptationConfig {
  /** train_step iterations. */
  public final int iterations;
  /** Samples per train_step; 0 or >= N means the whole support set every step. */
  public final int batchSize;
  /** Samples per fisher/infer call (Fisher is combined exactly as a sample-weighted mean). */
  public final int evalBatchSize;
  /** Learning rate sent through set_hparams; NaN keeps the model's default (no set_hparams call). */
  public final float learningRate;
  /** Seed of the mini-batch shuffle. */
  public final long seed;
  /** Call reset_state first, so every adaptation starts from the exported weights. */
  public final boolean resetFirst;
  /** Recompute the class prototypes with the adapted backbone after training. */
  public final boolean refreshPrototypes;
  /** Backward-pass budget handed to the selection policy. */
  public final Budget budget;
  /**
   * Train from the frozen-prefix cache when the model has it and it fits ({@link CachePlan}): the same
   * losses and state as full steps, computing only the layers above the cut per step. False: full steps.
   */
  public final boolean cache;
  /** The cache's limit in bytes; empty = the bytes of the support images as float32 (never more memory). */
  public final OptionalLong cacheLimitBytes;

  private AdaptationConfig(Builder b) {
    iterations = b.iterations;
    batchSize = b.batchSize;
    evalBatchSize = b.evalBatchSize;
    learningRate = b.learningRate;
    seed = b.seed;
    resetFirst = b.resetFirst;
    refreshPrototypes = b.refreshPrototypes;
    budget = b.budget;
    cache = b.cache;
    cacheLimitBytes = b.cacheLimitBytes;
  }

  /**
   * Builder with defaults: 20 iterations, batch 8, eval batch 16, model LR, seed 0, reset, refresh, cache on
   * up to the support images' bytes.
   */
  public static final class Builder {
    private int iterations = 20;
    private int batchSize = 8;
    private int evalBatchSize = 16;
    private float learningRate = Float.NaN;
    private long seed = 0;
    private boolean resetFirst = true;
    private boolean refreshPrototypes = true;
    private Budget budget = Budget.unlimited();
    private boolean cache = true;
    private OptionalLong cacheLimitBytes = OptionalLong.empty();

    public Builder iterations(int value) {
      if (value < 0) {
        throw new IllegalArgumentException("iterations must be >= 0; got " + value);
      }
      iterations = value;
      return this;
    }

    public Builder batchSize(int value) {
      if (value < 0) {
        throw new IllegalArgumentException("batchSize must be >= 0; got " + value);
      }
      batchSize = value;
      return this;
    }

    public Builder evalBatchSize(int value) {
      if (value < 1) {
        throw new IllegalArgumentException("evalBatchSize must be >= 1; got " + value);
      }
      evalBatchSize = value;
      return this;
    }

    public Builder learningRate(float value) {
      if (!(value > 0)) {
        throw new IllegalArgumentException("learningRate must be > 0; got " + value);
      }
      learningRate = value;
      return this;
    }

    public Builder seed(long value) {
      seed = value;
      return this;
    }

    public Builder resetFirst(boolean value) {
      resetFirst = value;
      return this;
    }

    public Builder refreshPrototypes(boolean value) {
      refreshPrototypes = value;
      return this;
    }

    public Builder budget(Budget value) {
      if (value == null) {
        throw new IllegalArgumentException("budget must not be null");
      }
      budget = value;
      return this;
    }

    public Builder cache(boolean value) {
      cache = value;
      return this;
    }

    public Builder cacheLimitBytes(long value) {
      if (value < 0) {
        throw new IllegalArgumentException("cacheLimitBytes must be >= 0; got " + value);
      }
      cacheLimitBytes = OptionalLong.of(value);
      return this;
    }

    public AdaptationConfig build() {
      return new AdaptationConfig(this);
    }
  }
}
