package org.tflitetrain.core.adapt;

import java.util.OptionalInt;
import java.util.OptionalLong;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.select.Budget;

/**
 * Settings of one adaptation run (immutable; build with {@link Builder}). The defaults are the default
 * adaptation protocol, Python's {@code tflite_train.runtime.protocol.DEFAULT_PROTOCOL} (the generated
 * {@code Contract.PROTOCOL_*}): {@link Contract#PROTOCOL_EPOCHS} passes over the support set at batch
 * {@link Contract#PROTOCOL_BATCH_SIZE}, B_compute {@link Contract#PROTOCOL_COMPUTE_FRACTION} of the full
 * backward pass, the model's learning rate; what Python's {@code AdaptConfig()} runs.
 */
public final class AdaptationConfig {
  /**
   * Passes over the support set: the run takes {@code epochs * ceil(N / batchSize)} train_step calls
   * ({@link #steps}); empty when {@link #iterations} is given.
   */
  public final OptionalInt epochs;
  /** A fixed number of train_step calls instead of {@link #epochs}; empty = the epochs decide. */
  public final OptionalInt iterations;
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
    epochs = iterations.isPresent() ? OptionalInt.empty() : OptionalInt.of(b.epochs.orElse(Contract.PROTOCOL_EPOCHS));
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
   * Optimizer steps (train_step calls) for {@code numSupport} support images, as Python's
   * {@code AdaptConfig.num_steps}: {@link #iterations} when given, else
   * {@code epochs * ceil(numSupport / batchSize)} (batch size 0 or at least {@code numSupport}: one step per
   * pass). The protocol's 40 passes at batch 1 take 1,000 steps for 25 images.
   *
   * @throws IllegalArgumentException {@code numSupport} below 1, or more steps than an int holds
   */
  public int steps(int numSupport) {
    if (numSupport < 1) {
      throw new IllegalArgumentException("numSupport must be >= 1; got " + numSupport);
    }
    if (iterations.isPresent()) {
      return iterations.getAsInt();
    }
    long perPass = batchSize == 0 ? 1 : (numSupport + (long) batchSize - 1) / batchSize;
    long steps = epochs.getAsInt() * perPass;
    if (steps > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("epochs " + epochs.getAsInt() + " x " + perPass + " steps per pass = " + steps
          + " steps; at most " + Integer.MAX_VALUE + " (give fewer epochs or fixed iterations)");
    }
    return (int) steps;
  }

  /**
   * Builder with the protocol's defaults ({@link Contract#PROTOCOL_EPOCHS} epochs, batch
   * {@link Contract#PROTOCOL_BATCH_SIZE}, a budget of B_compute {@link Contract#PROTOCOL_COMPUTE_FRACTION} and
   * no memory bound, learning rate {@link Contract#PROTOCOL_LEARNING_RATE}; NaN would mean the model's own), eval batch 16,
   * seed 0, reset, refresh, cache on up to the support images' bytes. {@link #iterations(int)} replaces the
   * epochs by a fixed number of steps; giving both {@link #epochs(int)} and {@link #iterations(int)} is refused
   * by {@link #build()}.
   */
  public static final class Builder {
    private OptionalInt epochs = OptionalInt.empty();
    private OptionalInt iterations = OptionalInt.empty();
    private int batchSize = Contract.PROTOCOL_BATCH_SIZE;
    private int evalBatchSize = 16;
    private float learningRate = (float) Contract.PROTOCOL_LEARNING_RATE;
    private long seed = 0;
    private boolean resetFirst = true;
    private boolean refreshPrototypes = true;
    private Budget budget = Budget.withFraction(Double.POSITIVE_INFINITY, Contract.PROTOCOL_COMPUTE_FRACTION);
    private boolean cache = true;
    private OptionalLong cacheLimitBytes = OptionalLong.empty();

    /** Passes over the support set (default {@link Contract#PROTOCOL_EPOCHS}); see {@link AdaptationConfig#steps}. */
    public Builder epochs(int value) {
      if (value < 1) {
        throw new IllegalArgumentException("epochs must be >= 1; got " + value);
      }
      epochs = OptionalInt.of(value);
      return this;
    }

    /** A fixed number of train_step calls instead of the epochs (0: no step). */
    public Builder iterations(int value) {
      if (value < 0) {
        throw new IllegalArgumentException("iterations must be >= 0; got " + value);
      }
      iterations = OptionalInt.of(value);
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

    /**
     * The backward-pass budget, replacing the protocol's default (B_compute
     * {@link Contract#PROTOCOL_COMPUTE_FRACTION} of the full backward pass, no memory bound); e.g.
     * {@code Budget.withFraction(memoryBytes, Contract.PROTOCOL_COMPUTE_FRACTION)} adds a memory bound.
     */
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

    /** @throws IllegalArgumentException both {@link #epochs(int)} and {@link #iterations(int)} were given */
    public AdaptationConfig build() {
      if (epochs.isPresent() && iterations.isPresent()) {
        throw new IllegalArgumentException("epochs (" + epochs.getAsInt() + ") and iterations (" + iterations.getAsInt()
            + ") are two training lengths: give one (iterations replaces the protocol's epochs)");
      }
      return new AdaptationConfig(this);
    }
  }
}
