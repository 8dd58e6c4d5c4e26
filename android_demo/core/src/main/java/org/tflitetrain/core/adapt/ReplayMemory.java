package org.tflitetrain.core.adapt;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;
import org.tflitetrain.core.model.CachedCut;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.ModelMetadata;

/**
 * A checkpoint's replay memory (issue 42; Python's {@code tflite_train.runtime.adaptation.replay_memory}): activations of
 * earlier support images at a cached cut and their classes, kept under a byte budget, so that a run from the
 * checkpoint ({@link Continuation}) trains on the old classes too. The activations are valid while no layer below
 * the cut changes, so a run from a memory selects only layers at or above its cut.
 *
 * <p>Which rows a budget keeps ({@link #keepRows}, {@link Contract#REPLAY_RULE}): M = floor(budget / bytes per
 * activation); over the pool (the stored rows oldest first, then the run's images), the classes take turns in
 * ascending order, each taking its most recent row not yet taken, until M rows are taken. The rule is pinned to
 * Python's by the golden {@code checkpoint_replay.json}; the order of one run's images before it is drawn with
 * {@link Random} here and with numpy in Python, so the two runtimes may keep different images of the same run.
 */
public final class ReplayMemory {
  public final String cutLayer;
  public final int cutIndex;
  private final int[] shape;
  public final long budgetBytes;
  /** f32[R, shape...], oldest first. */
  public final Tensor activations;
  private final int[] labels;

  /** @throws IllegalArgumentException for activations of another shape, labels of another length, or over budget */
  public ReplayMemory(String cutLayer, int cutIndex, int[] shape, long budgetBytes, Tensor activations, int[] labels) {
    int[] rows = activations.shape();
    if (activations.dtype != Tensor.DType.FLOAT32 || rows.length != shape.length + 1 || rows[0] < 1
        || !Arrays.equals(Arrays.copyOfRange(rows, 1, rows.length), shape)) {
      throw new IllegalArgumentException("replay activations must be FLOAT32 [R >= 1, " + Arrays.toString(shape)
          + "]; got " + activations);
    }
    if (labels.length != rows[0]) {
      throw new IllegalArgumentException("replay labels must have " + rows[0] + " entries; got " + labels.length);
    }
    if (4L * activations.size() > budgetBytes) {
      throw new IllegalArgumentException("replay activations take " + 4L * activations.size()
          + " bytes, over their budget of " + budgetBytes);
    }
    this.cutLayer = cutLayer;
    this.cutIndex = cutIndex;
    this.shape = shape.clone();
    this.budgetBytes = budgetBytes;
    this.activations = activations;
    this.labels = labels.clone();
  }

  /** One activation's shape, without the batch. */
  public int[] shape() {
    return shape.clone();
  }

  /** Each row's class (an index into the checkpoint's class names). */
  public int[] labels() {
    return labels.clone();
  }

  public int size() {
    return labels.length;
  }

  /** Bytes of the stored activations. */
  public long bytes() {
    return 4L * activations.size();
  }

  /** Rows per class 0..numClasses-1. */
  public int[] classCounts(int numClasses) {
    int[] counts = new int[numClasses];
    for (int label : labels) {
      counts[label]++;
    }
    return counts;
  }

  /** M = floor(budget / bytes per activation). */
  public static int capacity(long budgetBytes, long rowBytes) {
    if (rowBytes < 1) {
      throw new IllegalArgumentException("rowBytes must be >= 1; got " + rowBytes);
    }
    return (int) Math.min(Integer.MAX_VALUE, Math.max(0, budgetBytes / rowBytes));
  }

  /**
   * The rows the class-balanced, most-recent-first rule keeps (Python's {@code keep_rows}).
   *
   * @param labels each pool row's class, the pool oldest first
   * @param capacity the most rows kept
   * @return ascending indices into the pool
   */
  public static int[] keepRows(int[] labels, int capacity) {
    TreeMap<Integer, List<Integer>> queues = new TreeMap<>();
    for (int i = labels.length - 1; i >= 0; i--) {  // newest first
      queues.computeIfAbsent(labels[i], k -> new ArrayList<>()).add(i);
    }
    List<Integer> kept = new ArrayList<>();
    boolean any = !queues.isEmpty();
    while (kept.size() < capacity && any) {
      any = false;
      for (List<Integer> queue : queues.values()) {
        if (!queue.isEmpty() && kept.size() < capacity) {
          kept.add(queue.remove(0));
        }
        any |= !queue.isEmpty();
      }
    }
    int[] out = kept.stream().mapToInt(Integer::intValue).toArray();
    Arrays.sort(out);
    return out;
  }

  /**
   * The next memory: {@code memory}'s rows, then this run's in an order drawn from {@code seed}, kept under
   * {@code budgetBytes}; null when the budget holds no activation.
   *
   * @param memory the run's start memory (its labels already the run's classes), or null
   * @param cut the activations' cut (the memory's own when there is one)
   * @param activations f32[N, cut shape...] of the run's support images, with the adapted weights
   * @param labels their classes
   */
  public static ReplayMemory remember(ReplayMemory memory, CachedCut cut, Tensor activations, int[] labels,
      long budgetBytes, long seed) {
    if (memory != null && (!memory.cutLayer.equals(cut.layer) || !Arrays.equals(memory.shape, cut.shape()))) {
      throw new IllegalArgumentException("the replay memory is at cut " + memory.cutLayer
          + "; the run's activations at " + cut.layer);
    }
    int per = Math.toIntExact(cut.elementsPerImage());
    int n = labels.length;
    int[] order = new int[n];
    for (int i = 0; i < n; i++) {
      order[i] = i;
    }
    Random random = new Random(seed);
    for (int i = n - 1; i > 0; i--) {
      int j = random.nextInt(i + 1);
      int tmp = order[i];
      order[i] = order[j];
      order[j] = tmp;
    }
    int old = memory == null ? 0 : memory.size();
    float[] pool = new float[(old + n) * per];
    int[] poolLabels = new int[old + n];
    if (memory != null) {
      System.arraycopy(memory.activations.floats(), 0, pool, 0, old * per);
      System.arraycopy(memory.labels, 0, poolLabels, 0, old);
    }
    float[] fresh = activations.floats();
    for (int i = 0; i < n; i++) {
      System.arraycopy(fresh, order[i] * per, pool, (old + i) * per, per);
      poolLabels[old + i] = labels[order[i]];
    }
    int[] kept = keepRows(poolLabels, capacity(budgetBytes, cut.bytesPerImage()));
    if (kept.length == 0) {
      return null;
    }
    float[] rows = new float[kept.length * per];
    int[] keptLabels = new int[kept.length];
    for (int i = 0; i < kept.length; i++) {
      System.arraycopy(pool, kept[i] * per, rows, i * per, per);
      keptLabels[i] = poolLabels[kept[i]];
    }
    int[] full = new int[cut.shape().length + 1];
    full[0] = kept.length;
    System.arraycopy(cut.shape(), 0, full, 1, full.length - 1);
    return new ReplayMemory(cut.layer, cut.index, cut.shape(), budgetBytes, Tensor.ofFloats(full, rows), keptLabels);
  }

  /**
   * The cut a lineage's first memory takes: the highest cut at or below the deepest selected layer's index
   * ({@code deepestSelected}, -1 when nothing is selected), else the lowest cut; null without cuts.
   */
  public static CachedCut lineageCut(List<CachedCut> cuts, int deepestSelected) {
    CachedCut lowest = null;
    CachedCut best = null;
    for (CachedCut cut : cuts) {
      if (lowest == null || cut.index < lowest.index) {
        lowest = cut;
      }
      if (deepestSelected >= 0 && cut.index <= deepestSelected && (best == null || cut.index > best.index)) {
        best = cut;
      }
    }
    return best != null ? best : lowest;
  }

  /** The model's cut this memory is at. @throws CheckpointException unless the model has it, at its index and shape */
  public CachedCut requireCut(ModelMetadata m) throws CheckpointException {
    String where = "checkpoint header field " + Contract.CK_REPLAY + ".";
    for (CachedCut cut : m.cachedCuts) {
      if (cut.layer.equals(cutLayer)) {
        if (cut.index != cutIndex) {
          throw new CheckpointException(where + Contract.RP_CUT_INDEX + ": is " + cutIndex + "; layer '" + cutLayer
              + "' has index " + cut.index + " in this model");
        }
        if (!Arrays.equals(cut.shape(), shape)) {
          throw new CheckpointException(where + Contract.RP_ACTIVATION_SHAPE + ": is " + Arrays.toString(shape)
              + "; the cut at '" + cutLayer + "' has activations of shape " + Arrays.toString(cut.shape())
              + " in this model");
        }
        return cut;
      }
    }
    List<String> layers = new ArrayList<>();
    for (CachedCut cut : m.cachedCuts) {
      layers.add(cut.layer);
    }
    throw new CheckpointException(where + Contract.RP_CUT_LAYER + ": '" + cutLayer + "' is not a cached cut of this "
        + "model (" + (layers.isEmpty() ? "it has none" : String.join(", ", layers)) + ")");
  }
}
