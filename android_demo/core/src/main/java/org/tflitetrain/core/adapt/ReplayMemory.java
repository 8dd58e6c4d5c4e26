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
 * <p>Rows: the I stored images' plain (un-augmented) views, oldest first, then further (augmented) views of them,
 * grouped by image ({@link #images()}: rows 0..I-1 are images 0..I-1, then ascending image indices; a replay section
 * of version 1 has no such array: one plain view per row). Python stores the views its run trained on; this driver
 * does not augment, so its runs add plain views only, train on the stored images' plain views, and carry the stored
 * further views on into the next memory by the same rule.
 *
 * <p>Which rows a budget keeps ({@link Contract#REPLAY_RULE}): M = floor(budget / bytes per activation); over the
 * pool (the stored images oldest first, then the run's images), first the images ({@link #keepRows}): the classes
 * take turns in ascending order, each taking its most recent image not yet taken, until M are taken; then the rows
 * left go to further views ({@link #keepViews}): pass q offers the q-th view of every kept image that has one, the
 * classes taking turns, each giving it to its most recent image not yet served in the pass. Both rules are pinned to
 * Python's by the golden {@code checkpoint_replay.json}; the order of one run's images before it is drawn with
 * {@link Random} here and with numpy in Python, so the two runtimes may keep different images of the same run.
 */
public final class ReplayMemory {
  public final String cutLayer;
  public final int cutIndex;
  private final int[] shape;
  public final long budgetBytes;
  /** f32[R, shape...]: the images' plain views, oldest first, then their further views. */
  public final Tensor activations;
  private final int[] labels;
  private final int[] images;
  private final int numImages;

  /** A memory of one plain view per row (a replay section of version 1). */
  public ReplayMemory(String cutLayer, int cutIndex, int[] shape, long budgetBytes, Tensor activations, int[] labels) {
    this(cutLayer, cutIndex, shape, budgetBytes, activations, labels, range(labels.length));
  }

  /**
   * @param images each row's image: 0..I-1, then ascending indices below I (Python's {@code replay_images})
   * @throws IllegalArgumentException for activations of another shape, labels or images of another length, images
   *     out of that order, a row labelled unlike its image, or rows over budget
   */
  public ReplayMemory(String cutLayer, int cutIndex, int[] shape, long budgetBytes, Tensor activations, int[] labels,
      int[] images) {
    int[] rows = activations.shape();
    if (activations.dtype != Tensor.DType.FLOAT32 || rows.length != shape.length + 1 || rows[0] < 1
        || !Arrays.equals(Arrays.copyOfRange(rows, 1, rows.length), shape)) {
      throw new IllegalArgumentException("replay activations must be FLOAT32 [R >= 1, " + Arrays.toString(shape)
          + "]; got " + activations);
    }
    if (labels.length != rows[0]) {
      throw new IllegalArgumentException("replay labels must have " + rows[0] + " entries; got " + labels.length);
    }
    String problem = imageLayoutProblem(images, rows[0]);
    if (!problem.isEmpty()) {
      throw new IllegalArgumentException("replay images " + problem);
    }
    if (!labelsFollowImages(labels, images)) {
      throw new IllegalArgumentException("replay labels must be those of each row's image (its plain view's)");
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
    this.images = images.clone();
    this.numImages = Arrays.stream(images).max().orElse(-1) + 1;
  }

  /**
   * What is wrong with {@code images} as the row -> image index of a memory of {@code rows} rows (0..I-1, then
   * ascending within 0..I-1; Python's {@code replay_image_layout}), or "" when nothing.
   */
  public static String imageLayoutProblem(int[] images, int rows) {
    if (images.length != rows) {
      return "must be int32 [" + rows + "]; got int32 [" + images.length + "]";
    }
    int count = 0;
    for (int image : images) {
      if (image < 0) {
        return "holds the negative image index " + Arrays.stream(images).min().getAsInt();
      }
      count = Math.max(count, image + 1);
    }
    if (count > rows) {
      return "must begin with 0, 1, ..., I-1 (each image's plain view, I = its largest entry + 1)";
    }
    for (int i = 0; i < count; i++) {
      if (images[i] != i) {
        return "must begin with 0, 1, ..., I-1 (each image's plain view, I = its largest entry + 1)";
      }
    }
    for (int i = count + 1; i < rows; i++) {
      if (images[i] < images[i - 1]) {
        return "must continue with image indices 0..I-1 in ascending order (the further views, grouped by image)";
      }
    }
    return "";
  }

  /** Whether every row's label is its image's (the label of row {@code images[r]}). */
  static boolean labelsFollowImages(int[] labels, int[] images) {
    for (int r = 0; r < labels.length; r++) {
      if (labels[r] != labels[images[r]]) {
        return false;
      }
    }
    return true;
  }

  /** One activation's shape, without the batch. */
  public int[] shape() {
    return shape.clone();
  }

  /** Each row's class (an index into the checkpoint's class names). */
  public int[] labels() {
    return labels.clone();
  }

  /** Each row's image (rows 0..I-1 the images' plain views). */
  public int[] images() {
    return images.clone();
  }

  /** R, the stored rows. */
  public int size() {
    return labels.length;
  }

  /** I, the stored images. */
  public int numImages() {
    return numImages;
  }

  /** The images' classes (the labels of rows 0..I-1). */
  public int[] imageLabels() {
    return Arrays.copyOf(labels, numImages);
  }

  /** f32[I, shape...]: the images' plain views, oldest first. */
  public Tensor plain() {
    int[] full = activations.shape();
    full[0] = numImages;
    int per = activations.size() / size();
    return Tensor.ofFloats(full, Arrays.copyOf(activations.floats(), numImages * per));
  }

  /** e_i, the further views stored of each image. */
  public int[] furtherViews() {
    int[] counts = new int[numImages];
    for (int r = numImages; r < images.length; r++) {
      counts[images[r]]++;
    }
    return counts;
  }

  /** Bytes of the stored activations. */
  public long bytes() {
    return 4L * activations.size();
  }

  /** Stored images per class 0..numClasses-1. */
  public int[] classCounts(int numClasses) {
    int[] counts = new int[numClasses];
    for (int i = 0; i < numImages; i++) {
      counts[labels[i]]++;
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
   * Classes in ascending order take turns taking the head of their queue until {@code capacity} are taken or every
   * queue is empty; the taken entries in turn order.
   */
  private static List<Integer> classTurns(TreeMap<Integer, List<Integer>> queues, int capacity) {
    List<Integer> taken = new ArrayList<>();
    boolean any = queues.values().stream().anyMatch(q -> !q.isEmpty());
    while (taken.size() < capacity && any) {
      any = false;
      for (List<Integer> queue : queues.values()) {
        if (!queue.isEmpty() && taken.size() < capacity) {
          taken.add(queue.remove(0));
        }
        any |= !queue.isEmpty();
      }
    }
    return taken;
  }

  /**
   * The images the class-balanced, most-recent-first rule keeps (Python's {@code keep_rows}).
   *
   * @param labels each pool image's class, the pool oldest first
   * @param capacity the most images kept
   * @return ascending indices into the pool
   */
  public static int[] keepRows(int[] labels, int capacity) {
    TreeMap<Integer, List<Integer>> queues = new TreeMap<>();
    for (int i = labels.length - 1; i >= 0; i--) {  // newest first
      queues.computeIfAbsent(labels[i], k -> new ArrayList<>()).add(i);
    }
    int[] out = classTurns(queues, capacity).stream().mapToInt(Integer::intValue).toArray();
    Arrays.sort(out);
    return out;
  }

  /**
   * How many further views each kept image keeps (Python's {@code keep_views}): pass q = 1, 2, ... offers the q-th
   * view of every image with {@code available >= q}; in a pass the classes, in ascending order, take turns giving it
   * to their most recent image not yet served in the pass, until {@code capacity} views are given.
   *
   * @param labels each kept image's class, oldest first
   * @param available the further views each has
   * @param capacity the most further views kept in all
   * @return e_i per image: image i keeps its first e_i views
   */
  public static int[] keepViews(int[] labels, int[] available, int capacity) {
    int[] counts = new int[labels.length];
    int most = Arrays.stream(available).max().orElse(0);
    int left = capacity;
    for (int q = 1; q <= most && left > 0; q++) {
      TreeMap<Integer, List<Integer>> queues = new TreeMap<>();
      for (int i = labels.length - 1; i >= 0; i--) {  // newest first
        List<Integer> queue = queues.computeIfAbsent(labels[i], k -> new ArrayList<>());
        if (available[i] >= q) {
          queue.add(i);
        }
      }
      List<Integer> taken = classTurns(queues, left);
      for (int i : taken) {
        counts[i]++;
      }
      left -= taken.size();
    }
    return counts;
  }

  /**
   * The next memory: {@code memory}'s images (with their stored further views), then this run's in an order drawn
   * from {@code seed} (plain views: this driver draws no augmented views), kept under {@code budgetBytes} by
   * {@link #keepRows} then {@link #keepViews}; null when the budget holds no activation.
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
    int[] order = range(n);
    Random random = new Random(seed);
    for (int i = n - 1; i > 0; i--) {
      int j = random.nextInt(i + 1);
      int tmp = order[i];
      order[i] = order[j];
      order[j] = tmp;
    }
    int old = memory == null ? 0 : memory.numImages;
    float[] stored = memory == null ? new float[0] : memory.activations.floats();
    // the pool's images: each one's plain row and further rows (rows of `stored` or of `fresh`, by source)
    int[] poolLabels = new int[old + n];
    List<int[]> further = new ArrayList<>();
    for (int i = 0; i < old; i++) {
      poolLabels[i] = memory.labels[i];
      further.add(new int[0]);
    }
    for (int r = old; r < (memory == null ? 0 : memory.size()); r++) {
      int image = memory.images[r];
      int[] rows = Arrays.copyOf(further.get(image), further.get(image).length + 1);
      rows[rows.length - 1] = r;
      further.set(image, rows);
    }
    for (int i = 0; i < n; i++) {
      poolLabels[old + i] = labels[order[i]];
      further.add(new int[0]);
    }
    int capacity = capacity(budgetBytes, cut.bytesPerImage());
    int[] kept = keepRows(poolLabels, capacity);
    if (kept.length == 0) {
      return null;
    }
    int[] keptLabels = new int[kept.length];
    int[] available = new int[kept.length];
    for (int i = 0; i < kept.length; i++) {
      keptLabels[i] = poolLabels[kept[i]];
      available[i] = further.get(kept[i]).length;
    }
    int[] views = keepViews(keptLabels, available, capacity - kept.length);
    int total = kept.length + Arrays.stream(views).sum();
    float[] rows = new float[total * per];
    int[] rowLabels = new int[total];
    int[] rowImages = new int[total];
    float[] fresh = activations.floats();
    int r = 0;
    for (int i = 0; i < kept.length; i++, r++) {  // the plain views
      if (kept[i] < old) {
        System.arraycopy(stored, kept[i] * per, rows, r * per, per);
      } else {
        System.arraycopy(fresh, order[kept[i] - old] * per, rows, r * per, per);
      }
      rowLabels[r] = keptLabels[i];
      rowImages[r] = i;
    }
    for (int i = 0; i < kept.length; i++) {  // then each image's first e_i further views
      for (int v = 0; v < views[i]; v++, r++) {
        System.arraycopy(stored, further.get(kept[i])[v] * per, rows, r * per, per);
        rowLabels[r] = keptLabels[i];
        rowImages[r] = i;
      }
    }
    int[] full = new int[cut.shape().length + 1];
    full[0] = total;
    System.arraycopy(cut.shape(), 0, full, 1, full.length - 1);
    return new ReplayMemory(cut.layer, cut.index, cut.shape(), budgetBytes, Tensor.ofFloats(full, rows), rowLabels,
        rowImages);
  }

  private static int[] range(int n) {
    int[] out = new int[n];
    for (int i = 0; i < n; i++) {
      out[i] = i;
    }
    return out;
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
