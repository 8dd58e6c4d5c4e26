package org.tflitetrain.core.adapt;

import java.util.Arrays;
import java.util.OptionalInt;
import java.util.OptionalLong;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.select.Budget;

/**
 * Settings of one adaptation run (immutable; build with {@link Builder}). The defaults are the default
 * adaptation protocol, Python's {@code tflite_train.runtime.adaptation.protocol.DEFAULT_PROTOCOL} (the generated
 * {@code Contract.PROTOCOL_*}): {@link Contract#PROTOCOL_EPOCHS} passes over the support set at batch
 * {@link Contract#PROTOCOL_BATCH_SIZE}, B_compute {@link Contract#PROTOCOL_COMPUTE_FRACTION} of the full
 * backward pass, the model's learning rate; what Python's {@code AdaptConfig()} runs.
 */
public final class AdaptationConfig {
  /**
   * Where each update's class prototypes come from (Python {@code fine_tuning.PROTOTYPE_MODES}; TinyTrain
   * appendix C after P>M>F): the untrained backbone's, set once; recomputed through the current backbone before
   * every update (no gradient through them); or inside the {@code episode_step_from_<layer>} step (gradient
   * through them).
   */
  public enum PrototypeMode {
    FIXED("fixed"), REFRESH("refresh"), EPISODE("episode");

    /** The option's name in Python's {@code AdaptConfig.prototype_mode}. */
    public final String pythonName;

    PrototypeMode(String pythonName) {
      this.pythonName = pythonName;
    }

    /** @throws IllegalArgumentException for a name that is no mode */
    public static PrototypeMode fromName(String name) {
      for (PrototypeMode mode : values()) {
        if (mode.pythonName.equals(name)) {
          return mode;
        }
      }
      throw new IllegalArgumentException("prototypeMode must be one of fixed, refresh, episode; got " + name);
    }
  }

  /**
   * How an update's B pseudo-queries become one optimizer step (Python {@code fine_tuning.BATCH_MODES}): one
   * train step on B rows (the selection priced at B rows), or B one-row {@code accumulate_from_<layer>} calls
   * and one {@code apply_accumulated} (priced at 1 row).
   */
  public enum BatchMode {
    BATCH("batch"), ACCUMULATE("accumulate");

    /** The option's name in Python's {@code AdaptConfig.batch_mode}. */
    public final String pythonName;

    BatchMode(String pythonName) {
      this.pythonName = pythonName;
    }

    /** @throws IllegalArgumentException for a name that is no mode */
    public static BatchMode fromName(String name) {
      for (BatchMode mode : values()) {
        if (mode.pythonName.equals(name)) {
          return mode;
        }
      }
      throw new IllegalArgumentException("batchMode must be one of batch, accumulate; got " + name);
    }
  }

  /**
   * How the per-task rate choice ranks the candidate rates (Python {@code rate_choice.SCORES}): held-out
   * accuracy, ties to the rate listed first (P>M>F); or accuracy, ties to the lower held-out cross-entropy, then
   * the rate listed first.
   */
  public enum ChoiceScore {
    ACCURACY("accuracy"), ACCURACY_LOSS("accuracy_loss");

    /** The option's name in Python's {@code AdaptConfig.choice_score}. */
    public final String pythonName;

    ChoiceScore(String pythonName) {
      this.pythonName = pythonName;
    }

    /** @throws IllegalArgumentException for a name that is no score */
    public static ChoiceScore fromName(String name) {
      for (ChoiceScore score : values()) {
        if (score.pythonName.equals(name)) {
          return score;
        }
      }
      throw new IllegalArgumentException("choiceScore must be one of accuracy, accuracy_loss; got " + name);
    }
  }

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
   * Train from the cached cut when the model has it and it fits ({@link CachePlan}): the same
   * losses and state as full steps, computing only the layers above the cut per step. False: full steps.
   */
  public final boolean cache;
  /** The cache's limit in bytes; empty = the bytes of the support images as float32 (never more memory). */
  public final OptionalLong cacheLimitBytes;
  /** Where each update's prototypes come from; default {@link PrototypeMode#FIXED} (set once, as before). */
  public final PrototypeMode prototypeMode;
  /** One batched step per update (default) or the rows accumulated into one update. */
  public final BatchMode batchMode;
  /**
   * Candidate learning rates of the per-task choice ({@link RateChoice}), in priority order (0 = no update, listed
   * first so that it wins ties); null = no choice, every task uses {@link #learningRate}.
   */
  private final float[] rateChoice;
  /** Updates per candidate rate in the choice; empty = as many as the final run ({@link #steps}). */
  public final OptionalInt choiceUpdates;
  /** How the choice ranks the rates; default {@link ChoiceScore#ACCURACY}. */
  public final ChoiceScore choiceScore;

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
    prototypeMode = b.prototypeMode;
    batchMode = b.batchMode;
    rateChoice = b.rateChoice == null ? null : b.rateChoice.clone();
    choiceUpdates = b.choiceUpdates;
    choiceScore = b.choiceScore;
  }

  /** The candidate rates of the per-task choice (a copy), or null when the config fixes the rate. */
  public float[] rateChoice() {
    return rateChoice == null ? null : rateChoice.clone();
  }

  /** Updates per candidate rate of the choice: {@link #choiceUpdates}, else {@link #steps}{@code (numSupport)}. */
  public int choiceSteps(int numSupport) {
    return choiceUpdates.isPresent() ? choiceUpdates.getAsInt() : steps(numSupport);
  }

  /**
   * Rows one train-step call holds, which the selection is priced at (paper appendix A.4 scales the saved
   * activations with them), as Python's {@code AdaptConfig.rows_per_call}: {@code numSupport + batch} for episode
   * prototypes, 1 when accumulating, else the batch ({@code batch} = the batch size capped at the support set).
   */
  public int rowsPerCall(int numSupport, int batch) {
    if (prototypeMode == PrototypeMode.EPISODE) {
      return numSupport + batch;
    }
    return batchMode == BatchMode.ACCUMULATE ? 1 : batch;
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
   * seed 0, reset, refresh, cache on up to the support images' bytes, and Python's procedure defaults: fixed
   * prototypes, batched updates, no rate choice (choice updates = the run's, score accuracy). {@link #iterations(int)} replaces the
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
    private PrototypeMode prototypeMode = PrototypeMode.FIXED;
    private BatchMode batchMode = BatchMode.BATCH;
    private float[] rateChoice;
    private OptionalInt choiceUpdates = OptionalInt.empty();
    private ChoiceScore choiceScore = ChoiceScore.ACCURACY;

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

    /** Where each update's prototypes come from (default {@link PrototypeMode#FIXED}). */
    public Builder prototypeMode(PrototypeMode value) {
      if (value == null) {
        throw new IllegalArgumentException("prototypeMode must not be null");
      }
      prototypeMode = value;
      return this;
    }

    /** One batched step per update (default) or accumulated rows (needs the model's accumulation signatures). */
    public Builder batchMode(BatchMode value) {
      if (value == null) {
        throw new IllegalArgumentException("batchMode must not be null");
      }
      batchMode = value;
      return this;
    }

    /**
     * The candidate rates of P>M>F's per-task choice, in priority order (0 = no update; list it first); none =
     * no choice (the default).
     */
    public Builder rateChoice(float... rates) {
      if (rates == null || rates.length == 0) {
        rateChoice = null;
        return this;
      }
      for (float rate : rates) {
        if (!(rate >= 0) || Float.isInfinite(rate)) {
          throw new IllegalArgumentException("rateChoice must be finite rates >= 0; got " + Arrays.toString(rates));
        }
      }
      rateChoice = rates.clone();
      return this;
    }

    /** Updates per candidate rate in the choice (default: as many as the final run). */
    public Builder choiceUpdates(int value) {
      if (value < 1) {
        throw new IllegalArgumentException("choiceUpdates must be >= 1; got " + value);
      }
      choiceUpdates = OptionalInt.of(value);
      return this;
    }

    /** How the choice ranks the rates (default {@link ChoiceScore#ACCURACY}). */
    public Builder choiceScore(ChoiceScore value) {
      if (value == null) {
        throw new IllegalArgumentException("choiceScore must not be null");
      }
      choiceScore = value;
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
