package org.tflitetrain.core.adapt;

import java.util.List;
import java.util.OptionalInt;
import java.util.OptionalLong;
import org.tflitetrain.core.model.CachedCut;
import org.tflitetrain.core.model.ModelMetadata;

/**
 * Whether an adaptation trains from the cached cut, at which cut, and what the cache costs
 * (pure; the Java twin of Python {@code tflite_train.runtime.adaptation.cache_plan}).
 *
 * <p>A step from the cache ({@code train_step_from_<layer>}) starts from the activation at a cut instead of
 * the image: the layers below the cut never change while only layers above it are selected, so their
 * output for each support image is computed once ({@code features_<layer>}) and reused by every step. The
 * cut is the highest one at or below the deepest selected layer ({@link #cutFor}).
 *
 * <p>Memory: the cache holds N activations of the cut's shape (float32) next to the N support images. It
 * is used only when its bytes do not exceed the limit, by default the bytes of those images as float32, so
 * the cache never takes more memory than the images the full steps read.
 */
public final class CachePlan {
  /** True when the steps run from the cache. */
  public final boolean used;
  /** Why the cache is not used ("" when it is). */
  public final String reason;
  /** The cut for the selection, used or not; null when the model offers none for it. */
  public final CachedCut cut;
  /** Bytes of the cache (N activations; 0 without a cut). */
  public final long cacheBytes;
  /** Bytes of the N float32 support images the full steps read. */
  public final long imageBytes;
  /** The limit the cache was held to. */
  public final long limitBytes;
  /** Forward MACs per image of one step: above the cut when used, else the whole forward pass. */
  public final long stepForwardMacs;

  private CachePlan(boolean used, String reason, CachedCut cut, long cacheBytes, long imageBytes, long limitBytes,
      long stepForwardMacs) {
    this.used = used;
    this.reason = reason;
    this.cut = cut;
    this.cacheBytes = cacheBytes;
    this.imageBytes = imageBytes;
    this.limitBytes = limitBytes;
    this.stepForwardMacs = stepForwardMacs;
  }

  /** The cut's lowest layer, or null without a cut. */
  public String layer() {
    return cut == null ? null : cut.layer;
  }

  /**
   * Table index of the deepest (lowest-index) selected layer; empty when nothing is selected.
   */
  public static OptionalInt deepestSelected(ModelMetadata metadata, Selection selection) {
    return selection.channels().keySet().stream().mapToInt(metadata.table::indexOf).min();
  }

  /**
   * The cut a cached step uses: the one with the highest index at or below {@code deepestSelected} (a step
   * from it updates every selected layer); null when nothing is selected or no cut lies that low.
   *
   * @param cuts the model's cuts, ascending by index ({@link ModelMetadata#cachedCuts})
   */
  public static CachedCut cutFor(List<CachedCut> cuts, OptionalInt deepestSelected) {
    if (deepestSelected.isEmpty()) {
      return null;
    }
    CachedCut best = null;
    for (CachedCut cut : cuts) {
      if (cut.index <= deepestSelected.getAsInt() && (best == null || cut.index > best.index)) {
        best = cut;
      }
    }
    return best;
  }

  /**
   * Decides whether the steps of one adaptation run from the cache at {@code cut}.
   *
   * @param cut {@link #cutFor} the selection, or null
   * @param hasCuts the model has cache signatures at all (files exported before them have none)
   * @param enabled {@link AdaptationConfig#cache}
   * @param steps the training steps the adaptation will run (0: nothing to cache for)
   * @param numImages N, the support images the steps read
   * @param elementsPerImage H * W * C of one image
   * @param limitBytes the cache's limit; empty = the bytes of the N float32 images
   * @param forwardMacs the model's whole forward MACs per image
   */
  public static CachePlan decide(CachedCut cut, boolean hasCuts, boolean enabled, int steps, int numImages,
      long elementsPerImage, OptionalLong limitBytes, long forwardMacs) {
    long imageBytes = 4 * elementsPerImage * numImages;
    long limit = limitBytes.orElse(imageBytes);
    long cacheElements = cut == null ? 0 : cut.elementsPerImage() * numImages;
    long cacheBytes = 4 * cacheElements;
    String reason;
    if (steps == 0) {
      reason = "no training steps (empty selection or 0 iterations): nothing to cache";
    } else if (!enabled) {
      reason = "cache off (AdaptationConfig.Builder.cache(false)): full steps";
    } else if (!hasCuts) {
      reason = "the model has no cached-cut signatures (exported before them): full steps";
    } else if (cut == null) {
      reason = "no cached cut lies at or below the deepest selected layer: full steps";
    } else if (cacheBytes > limit) {
      reason = "the cache would take " + cacheBytes + " bytes, over its limit of " + limit + ": full steps";
    } else if (cacheElements > Integer.MAX_VALUE - 8) {
      reason = "the cache would hold " + cacheElements + " floats, more than one Java array holds: full steps";
    } else {
      return new CachePlan(true, "", cut, cacheBytes, imageBytes, limit, cut.suffixForwardMacs);
    }
    return new CachePlan(false, reason, cut, cacheBytes, imageBytes, limit, forwardMacs);
  }

  @Override
  public String toString() {
    return used ? "cache at " + cut.layer + " (" + cacheBytes + " bytes)" : "no cache: " + reason;
  }
}
