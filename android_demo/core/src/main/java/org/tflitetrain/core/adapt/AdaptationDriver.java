package org.tflitetrain.core.adapt;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CancellationException;
import java.util.function.BooleanSupplier;
import org.tflitetrain.core.cost.BackwardCost;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.model.CachedCut;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.MetadataLayer;
import org.tflitetrain.core.model.ModelMetadata;

/**
 * Drives an on-device adaptation through the exported signatures (CONTRACT.md):
 * reset_state -> infer (class-mean prototypes) -> set_head -> fisher -> policy -> set_selection ->
 * [set_hparams] -> train_step x steps -> [infer -> set_head] ; then {@link #classify} uses infer. The steps are
 * {@link AdaptationConfig#steps}: the config's fixed iterations, or its epochs (passes over the support set,
 * by default the protocol's) x ceil(N / batch size).
 *
 * <p>With the cached cut ({@link CachePlan}: the model has a cut at or below the deepest selected
 * layer, {@link AdaptationConfig#cache} is on and the cache fits its limit) the steps instead run
 * features_&lt;layer&gt; once over the support images, then train_step_from_&lt;layer&gt; x steps on
 * the cached activations, and the refresh runs infer_from_&lt;layer&gt; on them: the same losses and state
 * (nothing below the cut changes, and the driver does not augment, so the cached rows are exactly the
 * support images), with only the layers above the cut computed per step.
 *
 * <p>The fine-tuning procedure follows Python's {@code tflite_train.runtime.adaptation.trainer.adapt} (TinyTrain appendix C,
 * after P>M>F), by the config's {@link AdaptationConfig#prototypeMode} (prototypes fixed, refreshed before every
 * update, or inside {@code episode_step_from_<layer>}), {@link AdaptationConfig#batchMode} (one batched call, or
 * per-row {@code accumulate_from_<layer>} and one {@code apply_accumulated}) and
 * {@link AdaptationConfig#rateChoice()} (the per-task rate chosen on held-out support images, {@link RateChoice});
 * {@link UpdatePlan} resolves them against the model's signatures and B_mem (reduced, with a note, never an
 * exception). The driver does not augment and draws with {@link Random}, so its runs are not bit-identical to
 * Python's; the pure parts are (golden {@code procedure.json}).
 *
 * <p>{@link #adaptFrom} continues from a checkpoint instead ({@link Continuation}, issue 42): restore, the
 * checkpoint's classes then the new ones, the rows of the new images and of its replay memory's images (their plain
 * views; steps from the memory's cut, selection among the layers at or above it); {@link #checkpointAfter} writes
 * the result with the union selection and the next replay memory ({@link ReplayMemory}).
 *
 * <p>Not thread-safe: one adaptation or classification at a time per driver.
 */
public final class AdaptationDriver {
  /** Inputs of the signatures that need no argument: the contract's scalar dummy (CONTRACT.md). */
  private static final Map<String, Tensor> NO_INPUT = Map.of(Contract.DUMMY, Tensor.scalar(0));
  private final ModelMetadata metadata;
  private final SignatureRunner runner;
  private int numClasses;

  public AdaptationDriver(ModelMetadata metadata, SignatureRunner runner) {
    if (metadata == null || runner == null) {
      throw new IllegalArgumentException("metadata and runner must not be null");
    }
    this.metadata = metadata;
    this.runner = runner;
  }

  public ModelMetadata metadata() {
    return metadata;
  }

  /** Classes of the current head (0 before the first adaptation or restore). */
  public int numClasses() {
    return numClasses;
  }

  /**
   * Adapts the model to a labelled support set.
   *
   * @param images f32[N, H, W, C] in the metadata's input range
   * @param labels class of each image, in 0..numClasses-1; every class needs at least one image
   * @param numClasses 2..class_capacity
   * @param cancelled polled between signature calls; when true a {@link CancellationException} is thrown
   * @throws Exception from the runner; IllegalArgumentException for bad inputs
   */
  public AdaptationResult adapt(Tensor images, int[] labels, int numClasses, SelectionPolicy policy,
      AdaptationConfig config, AdaptationListener listener, BooleanSupplier cancelled) throws Exception {
    return run(null, images, labels, numClasses, policy, config, listener, cancelled);
  }

  /**
   * Continues from a checkpoint (issue 42; {@link Continuation}): restores it, adds the support set's new classes
   * and images, trains on its replay memory too (only layers at or above the memory's cut), and leaves the model
   * adapted to all {@link Continuation#classNames}; {@link #checkpointAfter} then writes the new checkpoint.
   *
   * @param labels each image's head class ({@link Continuation#headLabels}); any classes, at least one image
   * @throws CheckpointException the checkpoint or its memory does not fit this model
   */
  public AdaptationResult adaptFrom(Continuation start, Tensor images, int[] labels, SelectionPolicy policy,
      AdaptationConfig config, AdaptationListener listener, BooleanSupplier cancelled) throws Exception {
    if (start == null) {
      throw new IllegalArgumentException("start must not be null (use adapt for a run from the export)");
    }
    return run(start, images, labels, start.numClasses(), policy, config, listener, cancelled);
  }

  private AdaptationResult run(Continuation start, Tensor images, int[] labels, int numClasses, SelectionPolicy policy,
      AdaptationConfig config, AdaptationListener listener, BooleanSupplier cancelled) throws Exception {
    int newRows = checkImages(images);
    if (labels.length != newRows) {
      throw new IllegalArgumentException("labels must have one entry per image (" + newRows + "); got "
          + labels.length);
    }
    if (numClasses < 2 || numClasses > metadata.classCapacity) {
      throw new IllegalArgumentException("numClasses must be in 2.." + metadata.classCapacity + "; got " + numClasses);
    }
    int[] perClass = new int[numClasses];
    for (int label : labels) {
      if (label < 0 || label >= numClasses) {
        throw new IllegalArgumentException("labels must be in 0.." + (numClasses - 1) + "; got " + label);
      }
      perClass[label]++;
    }
    for (int c = 0; c < numClasses && start == null; c++) {
      if (perClass[c] == 0) {
        throw new IllegalArgumentException("class " + c + " has no images");
      }
    }
    ReplayMemory replay = start == null ? null : start.replay;
    CachedCut replayCut = null;
    float[][] kept = null;
    if (start != null) {
      start.checkpoint.requireModel(metadata);
      replayCut = start.cut(metadata);
      kept = start.keptPrototypes();
      stage(listener, AdaptationListener.Stage.RESET, cancelled);
      restore(start.checkpoint);
    } else if (config.resetFirst) {
      stage(listener, AdaptationListener.Stage.RESET, cancelled);
      runner.run(Contract.RESET_STATE, NO_INPUT);
    }
    // the rows: the new images, then the stored images' plain views (this driver draws no augmented views, so it
    // reads none of the memory's further views either: as a run from scratch here trains on the images themselves)
    int[] rowLabels = labels;
    Tensor replayed = replay == null ? null : replay.plain();
    if (replay != null) {
      rowLabels = Arrays.copyOf(labels, newRows + replay.numImages());
      System.arraycopy(replay.imageLabels(), 0, rowLabels, newRows, replay.numImages());
    }
    int n = rowLabels.length;
    stage(listener, AdaptationListener.Stage.PROTOTYPES, cancelled);
    float[][] initialEmbeddings = embed(images, config.evalBatchSize, cancelled);
    if (replay != null) {
      float[][] replayedEmbeddings = inferAll(replayCut.inferSignature, Contract.ACTIVATIONS, replayed,
          config.evalBatchSize, cancelled, Contract.EMBEDDINGS, metadata.featureDim);
      initialEmbeddings = concat(initialEmbeddings, replayedEmbeddings);
    }
    setPrototypes(initialEmbeddings, rowLabels, numClasses, kept, cancelled);

    stage(listener, AdaptationListener.Stage.FISHER, cancelled);
    FisherScores fisher = fisher(images, labels, config.evalBatchSize, cancelled);

    stage(listener, AdaptationListener.Stage.SELECTION, cancelled);
    int trainBatch = config.batchSize == 0 ? n : Math.min(config.batchSize, n);
    // priced at the rows one train-step call holds (Python's AdaptConfig.rows_per_call)
    Selection selection = policy.select(metadata, fisher, config.budget, config.rowsPerCall(n, trainBatch),
        start == null ? metadata.candidates : start.candidates(metadata));
    if (selection == null) {
      throw new IllegalStateException("policy " + policy.name() + " returned no selection");
    }
    float[] mask = selection.toMask(metadata);
    runner.run(Contract.SET_SELECTION, Map.of(Contract.CHANNEL_MASK, Tensor.ofFloats(new int[] {mask.length}, mask)));
    if (!Float.isNaN(config.learningRate)) {
      runner.run(Contract.SET_HPARAMS, Map.of(Contract.LEARNING_RATE, Tensor.scalar(config.learningRate)));
    }

    stage(listener, AdaptationListener.Stage.TRAINING, cancelled);
    // An empty selection is "no update" (policy none, or a budget that fits no layer): no train_step.
    int steps = selection.isEmpty() ? 0 : config.steps(n);
    CachePlan cache = CachePlan.decide(replay != null ? replayCut
        : CachePlan.cutFor(metadata.cachedCuts, CachePlan.deepestSelected(metadata, selection)),
        !metadata.cachedCuts.isEmpty(), config.cache, steps, n, metadata.input.elementsPerImage(),
        config.cacheLimitBytes, forwardMacs());
    if (replay != null && steps > 0 && !cache.used) {
      throw new IllegalArgumentException("the replay memory trains from its cut " + replayCut.layer + ", but the "
          + "steps cannot run from it (" + cache.reason + "); continue without replay instead");
    }
    // What every step reads: the activations at the cut (computed once; then the replayed ones) or the images.
    CachedCut rowCut = cache.used ? cache.cut : replayCut;
    Tensor inputs = rowCut == null ? images : features(rowCut, images, config.evalBatchSize, cancelled);
    if (replay != null) {
      inputs = concatRows(inputs, replayed);
    }
    Rows rows = new Rows(rowCut, inputs, rowLabels, numClasses, kept, config.evalBatchSize, listener, cancelled);
    UpdatePlan plan = null;
    RateChoice choice = null;
    int pricedRows = config.rowsPerCall(n, trainBatch);
    boolean updated = false;
    if (steps > 0) {
      CachedCut cut = rows.cut;
      plan = UpdatePlan.plan(config.prototypeMode, config.batchMode, trainBatch, n, cut != null,
          cut != null && cut.episodeSignature != null,
          cut != null && cut.accumulateSignature != null && metadata.applyAccumulatedSignature != null,
          r -> CostModel.backwardCostByName(metadata.table, selection.channelCounts(), metadata.optimizer.optimizer, r,
              true).totalBytes() <= config.budget.memoryBytes);
      pricedRows = plan.rows;
      float[] rates = config.rateChoice();
      rows.total = steps + (rates == null ? 0 : config.choiceSteps(n) * (int) countNonZero(rates));
      Random random = new Random(config.seed);
      float rate = config.learningRate;
      Map<String, Tensor> initial = rates == null ? null : getState();
      if (rates != null) {
        choice = chooseRate(rows, plan, config, initialEmbeddings, initial, random);
        rate = choice.rate;
      }
      rows.losses.clear();  // the result's curve is the final run's (the choice's updates were only reported)
      rows.accuracies.clear();
      if (rate != 0f) {
        if (rates != null) {
          setState(initial);
          runner.run(Contract.SET_HPARAMS, Map.of(Contract.LEARNING_RATE, Tensor.scalar(rate)));
        }
        runUpdates(rows, plan, identity(n), steps, random);
        updated = true;
      } else {
        setState(initial);  // rate 0: no update, the state after the head
      }
    }
    if ((config.refreshPrototypes || config.prototypeMode != AdaptationConfig.PrototypeMode.FIXED)
        && (updated || choice == null)) {
      stage(listener, AdaptationListener.Stage.REFRESH, cancelled);
      setPrototypes(rows.embed(identity(n)), rowLabels, numClasses, kept, cancelled);
    }
    BackwardCost cost = CostModel.backwardCostByName(metadata.table, selection.channelCounts(),
        metadata.optimizer.optimizer, pricedRows, true);
    listener.onStage(AdaptationListener.Stage.DONE);
    return new AdaptationResult(policy.name(), selection, cost, config.budget,
        config.budget.computeLimit(metadata.table), plan == null ? trainBatch : plan.batch, rows.losses,
        rows.accuracies, cache, plan, choice);
  }

  /**
   * The rows every update reads, as Python's {@code fine_tuning.RowSource}: the activations at the cached cut
   * (computed once per support image) or the support images themselves. The driver does not augment, so the
   * pseudo-queries are support rows too. Collects every update's loss and accuracy and reports them.
   */
  private final class Rows {
    final CachedCut cut;
    final Tensor inputs;
    final int[] labels;
    final int numClasses;
    /** A continued run's stored prototypes, for classes without a row (null otherwise). */
    final float[][] kept;
    final int evalBatch;
    final AdaptationListener listener;
    final BooleanSupplier cancelled;
    final List<Float> losses = new ArrayList<>();
    final List<Float> accuracies = new ArrayList<>();
    int total;
    int done;

    Rows(CachedCut cut, Tensor inputs, int[] labels, int numClasses, float[][] kept, int evalBatch,
        AdaptationListener listener, BooleanSupplier cancelled) {
      this.cut = cut;
      this.inputs = inputs;
      this.labels = labels;
      this.numClasses = numClasses;
      this.kept = kept;
      this.evalBatch = evalBatch;
      this.listener = listener;
      this.cancelled = cancelled;
    }

    String inputName() {
      return cut == null ? Contract.IMAGES : Contract.ACTIVATIONS;
    }

    /** Embeddings of {@code subset}'s rows with the current state (infer, or infer_from at the cut). */
    float[][] embed(int[] subset) throws Exception {
      return inferAll(cut == null ? Contract.INFER : cut.inferSignature, inputName(), gather(inputs, subset), evalBatch,
          cancelled, Contract.EMBEDDINGS, metadata.featureDim);
    }

    /** {@code signature} on the rows {@code batch} (and {@code extra} inputs); its loss and accuracy. */
    float[] call(String signature, int[] batch, Map<String, Tensor> extra) throws Exception {
      Map<String, Tensor> in = new LinkedHashMap<>(extra);
      in.put(inputName(), gather(inputs, batch));
      in.put(Contract.LABELS, Tensor.ofInts(new int[] {batch.length}, gatherInts(labels, batch)));
      Map<String, Tensor> out = runner.run(signature, in);
      return new float[] {output(out, signature, Contract.LOSS).floatValue(),
          output(out, signature, Contract.ACCURACY).floatValue()};
    }

    void record(float[] out) {
      losses.add(out[0]);
      accuracies.add(out[1]);
      listener.onStep(++done, Math.max(total, done), out[0], out[1]);
    }
  }

  /**
   * {@code updates} optimizer updates on the support rows {@code subset} by {@code plan}, as Python's
   * {@code fine_tuning.run_updates}: each update's B rows come from successive seeded permutations of the subset
   * (all of it, in order, when B is its size); prototypes refreshed before the update or built inside the episode
   * step; one batched call or B accumulated rows and one {@code apply_accumulated}. The model's state holds the
   * run's start (selection, learning rate, the prototypes "fixed" uses).
   */
  private void runUpdates(Rows rows, UpdatePlan plan, int[] subset, int updates, Random random) throws Exception {
    int m = subset.length;
    int[] order = identity(m);
    int cursor = m;
    int[] support = gatherInts(rows.labels, subset);
    for (int u = 0; u < updates; u++) {
      checkCancelled(rows.cancelled);
      int[] batch = new int[plan.batch];
      for (int i = 0; i < plan.batch; i++) {
        if (plan.batch == m) {
          batch[i] = subset[i];
          continue;
        }
        if (cursor == m) {
          shuffle(order, random);
          cursor = 0;
        }
        batch[i] = subset[order[cursor++]];
      }
      if (plan.prototypeMode == AdaptationConfig.PrototypeMode.REFRESH) {
        setPrototypes(rows.embed(subset), support, rows.numClasses, rows.kept, rows.cancelled);
      }
      float[] out;
      if (plan.prototypeMode == AdaptationConfig.PrototypeMode.EPISODE) {
        int[] all = new int[m + batch.length];
        System.arraycopy(subset, 0, all, 0, m);
        System.arraycopy(batch, 0, all, m, batch.length);
        float[] roles = new float[all.length];
        Arrays.fill(roles, 0, m, 1f);
        out = rows.call(rows.cut.episodeSignature, all,
            Map.of(Contract.SUPPORT_MASK, Tensor.ofFloats(new int[] {roles.length}, roles)));
      } else if (plan.batchMode == AdaptationConfig.BatchMode.ACCUMULATE) {
        out = new float[2];
        for (int row : batch) {
          float[] part = rows.call(rows.cut.accumulateSignature, new int[] {row}, Map.of());
          out[0] += part[0] / batch.length;
          out[1] += part[1] / batch.length;
        }
        runner.run(metadata.applyAccumulatedSignature, NO_INPUT);
      } else {
        out = rows.call(rows.cut == null ? Contract.TRAIN_STEP : rows.cut.trainSignature, batch, Map.of());
      }
      rows.record(out);
    }
  }

  /**
   * P>M>F's per-task rate ({@link RateChoice}), as Python's {@code trainer.choose_task_rate}: each non-zero
   * candidate fine-tunes on the prototype set (one support image per class, at most K pseudo-queries per update)
   * for {@link AdaptationConfig#choiceSteps} updates from {@code initial} and is scored on the held-out images;
   * rate 0 is scored on the untrained embeddings. Leaves the model in some run's end state (the caller restores
   * {@code initial}).
   */
  private RateChoice chooseRate(Rows rows, UpdatePlan plan, AdaptationConfig config, float[][] initialEmbeddings,
      Map<String, Tensor> initial, Random random) throws Exception {
    int[] labels = rows.labels;
    int[][] split = RateChoice.heldOutSplit(labels, rows.numClasses, config.seed);
    int[] prototypes = split[0];
    int[] held = split[1];
    float[] rates = config.rateChoice();
    if (held.length == 0) {
      return RateChoice.choose(rates, new double[0][], 0, config.choiceScore);
    }
    UpdatePlan choicePlan = plan.withBatch(Math.min(plan.batch, prototypes.length));
    double[][] scores = new double[rates.length][];
    for (int r = 0; r < rates.length; r++) {
      float[][] embeddings = initialEmbeddings;
      if (rates[r] != 0f) {
        setState(initial);
        setPrototypes(gatherRows(initialEmbeddings, prototypes), gatherInts(labels, prototypes), rows.numClasses,
            rows.kept, rows.cancelled);
        runner.run(Contract.SET_HPARAMS, Map.of(Contract.LEARNING_RATE, Tensor.scalar(rates[r])));
        runUpdates(rows, choicePlan, prototypes, config.choiceSteps(labels.length), random);
        embeddings = rows.embed(identity(labels.length));
      }
      scores[r] = RateChoice.heldOutScore(gatherRows(embeddings, held), gatherInts(labels, held),
          classMeans(gatherRows(embeddings, prototypes), gatherInts(labels, prototypes), rows.numClasses, rows.kept),
          metadata.headScale);
    }
    return RateChoice.choose(rates, scores, held.length, config.choiceScore);
  }

  /**
   * Runs {@code fisher} over the support set in batches and combines the per-batch scores exactly:
   * Delta = sum_b (N_b / N) Delta_b, since each batch's output is 1/(2 N_b) sum over its samples.
   */
  public FisherScores fisher(Tensor images, int[] labels, int batchSize, BooleanSupplier cancelled) throws Exception {
    int n = checkImages(images);
    Map<String, float[]> total = new LinkedHashMap<>();
    for (String name : metadata.candidates) {
      total.put(name, new float[metadata.candidate(name).outChannels]);
    }
    for (int start = 0; start < n; start += batchSize) {
      checkCancelled(cancelled);
      int[] batch = range(start, Math.min(n, start + batchSize));
      Map<String, Tensor> out = runner.run(Contract.FISHER, Map.of(
          Contract.IMAGES, gather(images, batch), Contract.LABELS, Tensor.ofInts(new int[] {batch.length}, gatherInts(labels, batch))));
      float weight = (float) batch.length / n;
      for (String name : metadata.candidates) {
        float[] values = output(out, Contract.FISHER, name).floats();
        float[] sum = total.get(name);
        if (values.length != sum.length) {
          throw new IllegalStateException("fisher output " + name + " has " + values.length + " entries; expected " + sum.length);
        }
        for (int i = 0; i < sum.length; i++) {
          sum[i] += weight * values[i];
        }
      }
    }
    return new FisherScores(metadata, total);
  }

  /** Embeddings f32[N, D] from {@code infer}, in batches. */
  public float[][] embed(Tensor images, int batchSize, BooleanSupplier cancelled) throws Exception {
    checkImages(images);
    return inferAll(Contract.INFER, Contract.IMAGES, images, batchSize, cancelled, Contract.EMBEDDINGS,
        metadata.featureDim);
  }

  /**
   * The activations f32[N, shape...] at {@code cut} ({@code features_<layer>}) of every image with the
   * current state, in batches of {@code batchSize}.
   */
  public Tensor features(CachedCut cut, Tensor images, int batchSize, BooleanSupplier cancelled) throws Exception {
    if (batchSize < 1) {
      throw new IllegalArgumentException("batchSize must be >= 1; got " + batchSize);
    }
    int n = checkImages(images);
    int[] shape = cut.shape();
    int per = Math.toIntExact(cut.elementsPerImage());
    float[] all = new float[Math.multiplyExact(n, per)];
    for (int start = 0; start < n; start += batchSize) {
      checkCancelled(cancelled);
      int[] batch = range(start, Math.min(n, start + batchSize));
      Tensor out = output(runner.run(cut.featuresSignature, Map.of(Contract.IMAGES, gather(images, batch))),
          cut.featuresSignature, Contract.ACTIVATIONS);
      int[] expected = new int[shape.length + 1];
      expected[0] = batch.length;
      System.arraycopy(shape, 0, expected, 1, shape.length);
      if (!Arrays.equals(out.shape(), expected)) {
        throw new IllegalStateException("signature " + cut.featuresSignature + " returned " + Contract.ACTIVATIONS
            + " of shape " + Arrays.toString(out.shape()) + "; expected " + Arrays.toString(expected));
      }
      System.arraycopy(out.floats(), 0, all, start * per, batch.length * per);
    }
    int[] full = new int[shape.length + 1];
    full[0] = n;
    System.arraycopy(shape, 0, full, 1, shape.length);
    return Tensor.ofFloats(full, all);
  }

  /**
   * Classifies images with the current head.
   *
   * @return per image the logits of the {@link #numClasses()} active classes
   */
  public float[][] classify(Tensor images, int batchSize) throws Exception {
    if (numClasses == 0) {
      throw new IllegalStateException("no head yet: adapt or restore state before classifying");
    }
    checkImages(images);
    float[][] logits = inferAll(Contract.INFER, Contract.IMAGES, images, batchSize, () -> false, Contract.LOGITS,
        metadata.classCapacity);
    float[][] out = new float[logits.length][];
    for (int i = 0; i < logits.length; i++) {
      out[i] = Arrays.copyOf(logits[i], numClasses);
    }
    return out;
  }

  /** Index of the largest value. */
  public static int argmax(float[] values) {
    int best = 0;
    for (int i = 1; i < values.length; i++) {
      if (values[i] > values[best]) {
        best = i;
      }
    }
    return best;
  }

  /** All state tensors from {@code get_state}. */
  public Map<String, Tensor> getState() throws Exception {
    return new LinkedHashMap<>(runner.run(Contract.GET_STATE, NO_INPUT));
  }

  /**
   * Restores tensors saved by {@link #getState()} through {@code set_state}; the number of classes is
   * read back from the {@code num_classes} state tensor when present.
   */
  public void setState(Map<String, Tensor> state) throws Exception {
    runner.run(Contract.SET_STATE, state);
    Tensor classes = state.get(Contract.NUM_CLASSES);
    if (classes != null && classes.dtype == Tensor.DType.INT32 && classes.size() == 1) {
      numClasses = classes.ints()[0];
    }
  }

  /**
   * The checkpoint (the format Python's {@code tflite_train.runtime.checkpoint.checkpoint} reads and writes) of the
   * current adapted state under {@code selection}.
   */
  public byte[] checkpoint(Selection selection, String policy, boolean includeOptimizer, List<String> classNames)
      throws Exception {
    return Checkpoint.encode(metadata, getState(), selection, policy, includeOptimizer, classNames);
  }

  /**
   * The checkpoint after a run (issue 42): the current state under {@code run}'s selection (a continued run: the
   * union with its checkpoint's, {@link Continuation#savedSelection}) and a replay memory of the run's support
   * images under {@code replayBudgetBytes} ({@link ReplayMemory#remember}; 0: none), at the start's memory's cut,
   * else the lineage cut of {@code run} ({@link ReplayMemory#lineageCut}).
   *
   * @param start the run's start, or null for a run from the export
   * @param labels the images' head classes
   * @param classNames the head's classes ({@code start.classNames} for a continued run)
   */
  public byte[] checkpointAfter(Continuation start, AdaptationResult run, Tensor images, int[] labels,
      List<String> classNames, long replayBudgetBytes, long seed, boolean includeOptimizer) throws Exception {
    Selection saved = start == null ? run.selection
        : Continuation.savedSelection(start.checkpoint.selection, run.selection, metadata);
    ReplayMemory memory = null;
    CachedCut cut = start != null && start.replay != null ? start.cut(metadata)
        : ReplayMemory.lineageCut(metadata.cachedCuts, CachePlan.deepestSelected(metadata, run.selection).orElse(-1));
    if (replayBudgetBytes > 0 && cut != null) {
      memory = ReplayMemory.remember(start == null ? null : start.replay, cut,
          features(cut, images, 4, () -> false), labels, replayBudgetBytes, seed);
    }
    return Checkpoint.encode(metadata, getState(), saved, run.policy, includeOptimizer, classNames, memory);
  }

  /** Restores a decoded checkpoint (reset_state, then set_state with its head, slices and selection mask). */
  public void restore(Checkpoint checkpoint) throws Exception {
    checkpoint.requireModel(metadata);
    resetState();
    setState(checkpoint.restore(metadata, getState()));
  }

  /** Saves {@link #checkpoint} to {@code path} atomically. */
  public void saveCheckpoint(java.nio.file.Path path, Selection selection, String policy, boolean includeOptimizer)
      throws Exception {
    Checkpoint.writeAtomic(path, checkpoint(selection, policy, includeOptimizer, List.of()));
  }

  /**
   * Restores a checkpoint (written by Java or Python): reset_state, then set_state with its head, slices
   * and selection mask. A checkpoint of another model is refused before anything changes.
   */
  public Checkpoint restoreCheckpoint(byte[] data, String source) throws Exception {
    Checkpoint checkpoint = Checkpoint.decode(data, source);
    restore(checkpoint);
    return checkpoint;
  }

  /** Restores the exported initial state (empty head and selection). */
  public void resetState() throws Exception {
    runner.run(Contract.RESET_STATE, NO_INPUT);
    numClasses = 0;
  }

  /**
   * Sets the class means of {@code embeddings} (one row per label) as the head ({@code set_head}); a class
   * without a row takes its {@code kept} prototype (a continued run's stored one; null: every class has rows).
   */
  private void setPrototypes(float[][] embeddings, int[] labels, int classes, float[][] kept, BooleanSupplier cancelled)
      throws Exception {
    int d = metadata.featureDim;
    float[][] means = classMeans(embeddings, labels, classes, kept);
    float[] prototypes = new float[metadata.classCapacity * d];
    for (int c = 0; c < classes; c++) {
      System.arraycopy(means[c], 0, prototypes, c * d, d);
    }
    checkCancelled(cancelled);
    runner.run(Contract.SET_HEAD, Map.of(Contract.PROTOTYPES, Tensor.ofFloats(new int[] {metadata.classCapacity, d}, prototypes),
        Contract.NUM_CLASSES, Tensor.scalar(classes)));
    numClasses = classes;
  }

  /**
   * c_k = the mean of the rows of class k, for k = 0..classes-1; a class without rows takes its {@code kept} row.
   *
   * @throws IllegalArgumentException a class has neither rows nor a kept prototype
   */
  private static float[][] classMeans(float[][] embeddings, int[] labels, int classes, float[][] kept) {
    int d = embeddings[0].length;
    float[][] means = new float[classes][d];
    int[] counts = new int[classes];
    for (int i = 0; i < labels.length; i++) {
      counts[labels[i]]++;
      for (int j = 0; j < d; j++) {
        means[labels[i]][j] += embeddings[i][j];
      }
    }
    for (int c = 0; c < classes; c++) {
      if (counts[c] == 0) {
        if (kept == null || c >= kept.length) {
          throw new IllegalArgumentException("class " + c + " has no row and no kept prototype");
        }
        means[c] = kept[c].clone();
        continue;
      }
      for (int j = 0; j < d; j++) {
        means[c][j] /= counts[c];
      }
    }
    return means;
  }

  private static float[][] concat(float[][] first, float[][] second) {
    float[][] out = Arrays.copyOf(first, first.length + second.length);
    System.arraycopy(second, 0, out, first.length, second.length);
    return out;
  }

  /** The rows of {@code first} then of {@code second} (float tensors of one row shape). */
  private static Tensor concatRows(Tensor first, Tensor second) {
    int[] shape = first.shape();
    float[] a = first.floats();
    float[] b = second.floats();
    float[] out = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    shape[0] += second.shape()[0];
    return Tensor.ofFloats(shape, out);
  }

  private static float[][] gatherRows(float[][] rows, int[] indices) {
    float[][] out = new float[indices.length][];
    for (int i = 0; i < indices.length; i++) {
      out[i] = rows[indices[i]];
    }
    return out;
  }

  private static long countNonZero(float[] values) {
    long count = 0;
    for (float v : values) {
      count += v != 0f ? 1 : 0;
    }
    return count;
  }

  /**
   * Output {@code key} (f32[N, width]) of an infer-like {@code signature} whose single input {@code inputName}
   * is {@code inputs} (images or cached activations), run in batches of rows.
   */
  private float[][] inferAll(String signature, String inputName, Tensor inputs, int batchSize, BooleanSupplier cancelled,
      String key, int width) throws Exception {
    if (batchSize < 1) {
      throw new IllegalArgumentException("batchSize must be >= 1; got " + batchSize);
    }
    int n = inputs.shape()[0];
    float[][] out = new float[n][];
    for (int start = 0; start < n; start += batchSize) {
      checkCancelled(cancelled);
      int[] batch = range(start, Math.min(n, start + batchSize));
      float[] flat = output(runner.run(signature, Map.of(inputName, gather(inputs, batch))), signature, key).floats();
      if (flat.length != batch.length * width) {
        throw new IllegalStateException(signature + " output " + key + " has " + flat.length + " values; expected "
            + batch.length + " x " + width);
      }
      for (int i = 0; i < batch.length; i++) {
        out[start + i] = Arrays.copyOfRange(flat, i * width, (i + 1) * width);
      }
    }
    return out;
  }

  private int checkImages(Tensor images) {
    int[] shape = images.shape();
    int[] expected = {-1, metadata.input.height, metadata.input.width, metadata.input.channels};
    if (images.dtype != Tensor.DType.FLOAT32 || shape.length != 4 || shape[0] < 1 || shape[1] != expected[1]
        || shape[2] != expected[2] || shape[3] != expected[3]) {
      throw new IllegalArgumentException("images must be FLOAT32 [N>=1, " + expected[1] + ", " + expected[2] + ", "
          + expected[3] + "]; got " + images);
    }
    return shape[0];
  }

  /** Forward MACs per image of the whole model (the sum over the layer table). */
  private long forwardMacs() {
    long total = 0;
    for (MetadataLayer layer : metadata.layers) {
      total += layer.forwardMacs;
    }
    return total;
  }

  private static Tensor output(Map<String, Tensor> outputs, String signature, String name) {
    Tensor tensor = outputs.get(name);
    if (tensor == null) {
      throw new IllegalStateException("signature " + signature + " returned no output " + name + "; outputs: "
          + outputs.keySet());
    }
    return tensor;
  }

  /** Rows {@code rows} (along the first axis) of a float tensor of any rank >= 1. */
  static Tensor gather(Tensor tensor, int[] rows) {
    int[] shape = tensor.shape();
    int per = shape[0] == 0 ? 0 : tensor.size() / shape[0];
    float[] data = tensor.floats();
    float[] out = new float[rows.length * per];
    for (int i = 0; i < rows.length; i++) {
      System.arraycopy(data, rows[i] * per, out, i * per, per);
    }
    shape[0] = rows.length;
    return Tensor.ofFloats(shape, out);
  }

  private static int[] gatherInts(int[] values, int[] rows) {
    int[] out = new int[rows.length];
    for (int i = 0; i < rows.length; i++) {
      out[i] = values[rows[i]];
    }
    return out;
  }

  private static int[] identity(int n) {
    return range(0, n);
  }

  private static int[] range(int start, int end) {
    int[] out = new int[end - start];
    for (int i = 0; i < out.length; i++) {
      out[i] = start + i;
    }
    return out;
  }

  private static void shuffle(int[] order, Random random) {
    for (int i = order.length - 1; i > 0; i--) {
      int j = random.nextInt(i + 1);
      int tmp = order[i];
      order[i] = order[j];
      order[j] = tmp;
    }
  }

  private static void stage(AdaptationListener listener, AdaptationListener.Stage stage, BooleanSupplier cancelled) {
    checkCancelled(cancelled);
    listener.onStage(stage);
  }

  private static void checkCancelled(BooleanSupplier cancelled) {
    if (cancelled.getAsBoolean()) {
      throw new CancellationException("adaptation cancelled");
    }
  }
}
