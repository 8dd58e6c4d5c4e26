package org.tflitetrain.core.model;

import java.util.Arrays;

/**
 * One cached cut of a model (metadata {@code cached_cuts}, CONTRACT.md "Cached cuts";
 * Python {@code tflite_train.runtime.model.interpreter.CachedCut}).
 *
 * <p>{@link #featuresSignature} computes, from the images, the activation every layer from {@link #layer} up
 * reads; {@link #trainSignature} and {@link #inferSignature} run the rest of the network from that
 * activation. While no layer below the cut is selected those layers never change, so the activation of a
 * support image can be computed once and reused by every training step.
 *
 * <p>Files exported with the episode signatures (issue 39) also name {@link #episodeSignature} (one step on
 * an episode's ProtoNet loss with prototypes computed in the graph from its support rows) and
 * {@link #accumulateSignature} (the rows' gradient added into accumulators that {@code apply_accumulated}
 * steps with); both are null for older files.
 */
public final class CachedCut {
  /** The cut's lowest layer L: a step from the cache updates layers from L upward only. */
  public final String layer;
  /** L's index in the layer table. */
  public final int index;
  private final int[] shape;
  /** Images -> activations ({@code features_<layer>}). */
  public final String featuresSignature;
  /** Activations and labels -> one optimizer step ({@code train_step_from_<layer>}). */
  public final String trainSignature;
  /** Activations -> embeddings and logits ({@code infer_from_<layer>}). */
  public final String inferSignature;
  /** Forward MACs per image of the layers above the cut (what one cached step still computes forward). */
  public final long suffixForwardMacs;
  /** Activations, labels and support_mask -> one episode step ({@code episode_step_from_<layer>}); null if absent. */
  public final String episodeSignature;
  /** Activations and labels -> the gradient accumulated ({@code accumulate_from_<layer>}); null if absent. */
  public final String accumulateSignature;

  /**
   * A cut as the metadata describes it ({@link ModelMetadata#cachedCuts} parses and checks the entries
   * against the layer table and the contract's signature names).
   *
   * @throws IllegalArgumentException for a null name, a negative index or MAC count, or a non-positive shape
   */
  public CachedCut(String layer, int index, int[] shape, String featuresSignature, String trainSignature,
      String inferSignature, long suffixForwardMacs) {
    this(layer, index, shape, featuresSignature, trainSignature, inferSignature, suffixForwardMacs, null, null);
  }

  /**
   * A cut with its optional episode and accumulation signatures (either may be null: the file has none).
   *
   * @throws IllegalArgumentException as {@link #CachedCut(String, int, int[], String, String, String, long)}
   */
  public CachedCut(String layer, int index, int[] shape, String featuresSignature, String trainSignature,
      String inferSignature, long suffixForwardMacs, String episodeSignature, String accumulateSignature) {
    if (layer == null || featuresSignature == null || trainSignature == null || inferSignature == null) {
      throw new IllegalArgumentException("a cached cut needs its layer and its three signature names");
    }
    if (index < 0 || suffixForwardMacs < 0) {
      throw new IllegalArgumentException("cached cut " + layer + ": index and suffixForwardMacs must be >= 0; got "
          + index + " and " + suffixForwardMacs);
    }
    if (shape == null || shape.length == 0 || Arrays.stream(shape).anyMatch(d -> d < 1)) {
      throw new IllegalArgumentException("cached cut " + layer + ": shape must be positive sizes; got "
          + Arrays.toString(shape));
    }
    this.layer = layer;
    this.index = index;
    this.shape = shape.clone();
    this.featuresSignature = featuresSignature;
    this.trainSignature = trainSignature;
    this.inferSignature = inferSignature;
    this.suffixForwardMacs = suffixForwardMacs;
    this.episodeSignature = episodeSignature;
    this.accumulateSignature = accumulateSignature;
  }

  /** The cached activation's shape without the batch dimension (a copy). */
  public int[] shape() {
    return shape.clone();
  }

  /** Float elements of one image's activation (the product of {@link #shape()}). */
  public long elementsPerImage() {
    long elements = 1;
    for (int d : shape) {
      elements *= d;
    }
    return elements;
  }

  /** Bytes of one image's float32 activation. */
  public long bytesPerImage() {
    return 4 * elementsPerImage();
  }

  @Override
  public String toString() {
    return "CachedCut(" + layer + " @" + index + ", " + Arrays.toString(shape) + ")";
  }
}
