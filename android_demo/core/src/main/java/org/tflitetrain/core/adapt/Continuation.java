package org.tflitetrain.core.adapt;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.tflitetrain.core.model.CachedCut;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.ModelMetadata;

/**
 * Where a continued adaptation starts (issue 42; Python's {@code tflite_train.runtime.adaptation.continual.AdaptStart}): a
 * checkpoint's state and classes, the support set's new classes after them, and the checkpoint's replay memory.
 *
 * <ul>
 *   <li>Classes by name: the head's classes are the checkpoint's, in order, then the support set's classes the
 *       checkpoint does not name, in the support set's order; an old class without new images is kept.
 *   <li>{@link AdaptationDriver#adaptFrom} restores the checkpoint instead of {@code reset_state}; a class's
 *       prototype is the mean embedding of its rows (new images and the stored images' plain views), or the
 *       stored one when it has none; the updates draw from the new rows and the replayed ones; with a memory, only
 *       the layers at or above its cut are offered to the policy ({@link #candidates}).
 *   <li>{@link AdaptationDriver#checkpointAfter} stores the union of the checkpoint's selection and the run's
 *       ({@link #savedSelection}) and the next memory.
 * </ul>
 */
public final class Continuation {
  public final Checkpoint checkpoint;
  /** The run's classes: the checkpoint's, then the support set's new ones. */
  public final List<String> classNames;
  /** The memory the run trains on, or null (none stored, or a replay budget of 0). */
  public final ReplayMemory replay;
  private final int[] index;

  private Continuation(Checkpoint checkpoint, List<String> classNames, ReplayMemory replay, int[] index) {
    this.checkpoint = checkpoint;
    this.classNames = List.copyOf(classNames);
    this.replay = replay;
    this.index = index;
  }

  /**
   * The start of a run from {@code checkpoint} on a support set of the classes {@code supportNames}.
   *
   * @param useReplay train on the checkpoint's memory when it has one (false: a replay budget of 0)
   * @throws IllegalArgumentException the checkpoint names no classes, or a support name repeats
   */
  public static Continuation of(Checkpoint checkpoint, List<String> supportNames, boolean useReplay) {
    if (checkpoint.classNames.isEmpty()) {
      throw new IllegalArgumentException("the checkpoint names no classes (written without class names): a run from "
          + "it matches the support set's classes by name");
    }
    if (new TreeSet<>(supportNames).size() != supportNames.size()) {
      throw new IllegalArgumentException("support class names repeat: classes are matched by name");
    }
    List<String> names = new ArrayList<>(checkpoint.classNames);
    for (String name : supportNames) {
      if (!names.contains(name)) {
        names.add(name);
      }
    }
    int[] index = new int[supportNames.size()];
    for (int k = 0; k < index.length; k++) {
      index[k] = names.indexOf(supportNames.get(k));
    }
    return new Continuation(checkpoint, names, useReplay ? checkpoint.replay : null, index);
  }

  public int numClasses() {
    return classNames.size();
  }

  /** The head class of each support label ({@code supportNames}' indices). */
  public int[] headLabels(int[] supportLabels) {
    int[] out = new int[supportLabels.length];
    for (int i = 0; i < out.length; i++) {
      if (supportLabels[i] < 0 || supportLabels[i] >= index.length) {
        throw new IllegalArgumentException("support labels must be in 0.." + (index.length - 1) + "; got "
            + supportLabels[i]);
      }
      out[i] = index[supportLabels[i]];
    }
    return out;
  }

  /** The checkpoint's prototypes [K_old][D], kept for a class without a row in the run. */
  float[][] keptPrototypes() {
    Tensor prototypes = checkpoint.arrays.get(Contract.PROTOTYPES);
    int rows = prototypes.shape()[0];
    int d = prototypes.shape()[1];
    float[] flat = prototypes.floats();
    float[][] out = new float[rows][];
    for (int k = 0; k < rows; k++) {
      out[k] = Arrays.copyOfRange(flat, k * d, (k + 1) * d);
    }
    return out;
  }

  /** The memory's cut in the model (null without a memory). @throws CheckpointException when the model lacks it */
  public CachedCut cut(ModelMetadata m) throws CheckpointException {
    return replay == null ? null : replay.requireCut(m);
  }

  /** The layers the run may select: the candidates, at or above the memory's cut when it has one. */
  public List<String> candidates(ModelMetadata m) {
    if (replay == null) {
      return m.candidates;
    }
    List<String> out = new ArrayList<>();
    for (String name : m.candidates) {
      if (m.table.indexOf(name) >= replay.cutIndex) {
        out.add(name);
      }
    }
    return out;
  }

  /** Every channel {@code start} changed or {@code run} selected, per layer: what the continued checkpoint stores. */
  public static Selection savedSelection(Map<String, int[]> start, Selection run, ModelMetadata m) {
    Map<String, int[]> union = new LinkedHashMap<>();
    Map<String, int[]> selected = run.channels();
    for (String layer : m.candidates) {
      TreeSet<Integer> channels = new TreeSet<>();
      for (int[] from : new int[][] {start.getOrDefault(layer, new int[0]), selected.getOrDefault(layer, new int[0])}) {
        for (int c : from) {
          channels.add(c);
        }
      }
      if (!channels.isEmpty()) {
        union.put(layer, channels.stream().mapToInt(Integer::intValue).toArray());
      }
    }
    return new Selection(m, union);
  }
}
