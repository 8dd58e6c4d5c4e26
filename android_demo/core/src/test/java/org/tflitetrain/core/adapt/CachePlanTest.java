package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.OptionalLong;
import org.junit.Test;
import org.tflitetrain.core.model.CachedCut;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.ModelMetadata;

/**
 * {@link CachePlan}: the cut choice (highest cut at or below the deepest selected layer) and the fit
 * decision (Python {@code tflite_train.runtime.adaptation.cache_plan}), on hand-computed cases.
 */
public class CachePlanTest {
  /** 32 x 32 x 3 images: 3072 floats, 12288 bytes each. */
  private static final long PIXELS = 32 * 32 * 3;
  private static final long FORWARD_MACS = 1_000_000;

  private static CachedCut cut(String layer, int index, long suffixMacs, int... shape) {
    return new CachedCut(layer, index, shape, Contract.FEATURES_PREFIX + layer, Contract.TRAIN_FROM_PREFIX + layer,
        Contract.INFER_FROM_PREFIX + layer, suffixMacs);
  }

  // Cuts at table indices 6, 9 and 12, given out of order (ModelMetadata sorts; cutFor must not rely on it).
  private static final CachedCut LOW = cut("b02_expand", 6, 90_000, 8, 8, 12);
  private static final CachedCut MID = cut("b03_expand", 9, 40_000, 8, 8, 12);
  private static final CachedCut TOP = cut("final", 12, 8_000, 4, 4, 16);
  private static final List<CachedCut> CUTS = List.of(MID, LOW, TOP);

  @Test
  public void choosesTheHighestCutAtOrBelowTheDeepestSelectedLayer() {
    assertSame(MID, CachePlan.cutFor(CUTS, OptionalInt.of(9)));
    assertSame(MID, CachePlan.cutFor(CUTS, OptionalInt.of(10)));
    assertSame(MID, CachePlan.cutFor(CUTS, OptionalInt.of(11)));
    assertSame(LOW, CachePlan.cutFor(CUTS, OptionalInt.of(6)));
    assertSame(LOW, CachePlan.cutFor(CUTS, OptionalInt.of(8)));
    assertSame(TOP, CachePlan.cutFor(CUTS, OptionalInt.of(12)));
  }

  @Test
  public void noCutWhenNothingIsSelectedOrTheSelectionReachesBelowEveryCut() {
    assertNull(CachePlan.cutFor(CUTS, OptionalInt.empty()));
    assertNull(CachePlan.cutFor(CUTS, OptionalInt.of(5)));
    assertNull(CachePlan.cutFor(CUTS, OptionalInt.of(0)));
    assertNull(CachePlan.cutFor(List.of(), OptionalInt.of(12)));
  }

  @Test
  public void usesTheCacheWhenItFitsTheDefaultLimit() {
    // 9 images: cache 9 x 8*8*12 floats = 27648 bytes; images 9 x 12288 = 110592 bytes (the default limit).
    CachePlan plan = CachePlan.decide(MID, true, true, 5, 9, PIXELS, OptionalLong.empty(), FORWARD_MACS);
    assertTrue(plan.reason, plan.used);
    assertEquals("", plan.reason);
    assertEquals("b03_expand", plan.layer());
    assertEquals(27_648, plan.cacheBytes);
    assertEquals(110_592, plan.imageBytes);
    assertEquals(110_592, plan.limitBytes);
    assertEquals(40_000, plan.stepForwardMacs);
  }

  @Test
  public void theLimitIsInclusive() {
    assertTrue(CachePlan.decide(MID, true, true, 5, 9, PIXELS, OptionalLong.of(27_648), FORWARD_MACS).used);
    CachePlan over = CachePlan.decide(MID, true, true, 5, 9, PIXELS, OptionalLong.of(27_647), FORWARD_MACS);
    assertFalse(over.used);
    assertTrue(over.reason, over.reason.contains("27648 bytes, over its limit of 27647"));
    assertEquals("b03_expand", over.layer());
    assertEquals(27_648, over.cacheBytes);
    assertEquals(FORWARD_MACS, over.stepForwardMacs);
  }

  @Test
  public void aCacheLargerThanTheImagesIsRefusedByDefault() {
    // A wide activation: 32 x 32 x 8 floats per image > 32 x 32 x 3 pixels.
    CachedCut wide = cut("b00_depthwise", 1, 500_000, 32, 32, 8);
    CachePlan plan = CachePlan.decide(wide, true, true, 5, 4, PIXELS, OptionalLong.empty(), FORWARD_MACS);
    assertFalse(plan.used);
    assertEquals(4 * 4 * 32 * 32 * 8, plan.cacheBytes);
    assertTrue(plan.reason, plan.reason.contains("over its limit of " + 4 * 4 * PIXELS));
  }

  @Test
  public void fullStepsWithTheReason() {
    CachePlan none = CachePlan.decide(null, false, true, 5, 9, PIXELS, OptionalLong.empty(), FORWARD_MACS);
    assertFalse(none.used);
    assertTrue(none.reason, none.reason.contains("no cached-cut signatures"));
    assertNull(none.layer());
    assertEquals(0, none.cacheBytes);
    assertEquals(FORWARD_MACS, none.stepForwardMacs);

    CachePlan below = CachePlan.decide(CachePlan.cutFor(CUTS, OptionalInt.of(3)), true, true, 5, 9, PIXELS,
        OptionalLong.empty(), FORWARD_MACS);
    assertFalse(below.used);
    assertTrue(below.reason, below.reason.contains("no cached cut lies at or below the deepest selected layer"));

    CachePlan off = CachePlan.decide(MID, true, false, 5, 9, PIXELS, OptionalLong.empty(), FORWARD_MACS);
    assertFalse(off.used);
    assertTrue(off.reason, off.reason.contains("cache off"));

    CachePlan idle = CachePlan.decide(MID, true, true, 0, 9, PIXELS, OptionalLong.empty(), FORWARD_MACS);
    assertFalse(idle.used);
    assertTrue(idle.reason, idle.reason.contains("no training steps"));
  }

  @Test
  public void deepestSelectedIsTheLowestTableIndexOfTheSelection() throws Exception {
    ModelMetadata m = AdaptationDriverTest.metadata();
    assertEquals(OptionalInt.empty(), CachePlan.deepestSelected(m, new Selection(m, Map.of())));
    String low = m.candidates.get(1);
    String high = m.candidates.get(m.candidates.size() - 1);
    Selection selection = new Selection(m, Map.of(high, new int[] {0}, low, new int[] {1, 2}));
    assertEquals(OptionalInt.of(m.table.indexOf(low)), CachePlan.deepestSelected(m, selection));
  }

  @Test
  public void cutsAreCheckedOnConstruction() {
    assertThrows(IllegalArgumentException.class, () -> cut("x", 1, 0, 4, 0, 2));
    assertThrows(IllegalArgumentException.class, () -> cut("x", 1, 0));
    assertThrows(IllegalArgumentException.class, () -> cut("x", -1, 0, 4));
    assertEquals(4 * 8 * 8 * 12, MID.bytesPerImage());
  }

  @Test
  public void cacheLimitMustNotBeNegative() {
    assertThrows(IllegalArgumentException.class, () -> new AdaptationConfig.Builder().cacheLimitBytes(-1));
    AdaptationConfig config = new AdaptationConfig.Builder().build();
    assertTrue(config.cache);
    assertEquals(OptionalLong.empty(), config.cacheLimitBytes);
  }
}
