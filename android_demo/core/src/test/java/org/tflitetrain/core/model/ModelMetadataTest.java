package org.tflitetrain.core.model;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.Test;
import org.tflitetrain.core.JsonText;
import org.tflitetrain.core.Resources;
import org.tflitetrain.core.cost.Optimizer;
import org.tflitetrain.core.json.Json;

public class ModelMetadataTest {
  static final String GOLDEN = Resources.text("/golden/metadata_tiny_32.json");

  @Test
  public void parsesGoldenMetadata() throws Exception {
    ModelMetadata m = ModelMetadata.parse(GOLDEN);
    assertEquals(1, m.formatVersion);
    assertEquals("tiny", m.backbone);
    assertEquals(64, m.modelId.length());
    assertEquals(32, m.input.height);
    assertEquals(3, m.input.channels);
    assertEquals(0.0, m.input.rangeLow, 0);
    assertEquals(1.0, m.input.rangeHigh, 0);
    assertEquals(10, m.classCapacity);
    assertEquals(Optimizer.ADAM, m.optimizer.optimizer);
    assertEquals(13, m.table.size());
    assertEquals(m.layers.size(), m.table.size());
    int expectedMask = 0;
    for (String name : m.candidates) {
      assertEquals(expectedMask, m.maskOffset(name));
      expectedMask += m.table.get(name).outChannels;
      assertTrue(m.layers.get(m.table.indexOf(name)).candidate);
    }
    assertEquals(expectedMask, m.maskLength());
    assertEquals("final", m.candidates.get(m.candidates.size() - 1));
    assertTrue(m.raw.containsKey("signatures"));
  }

  @Test
  public void parsesUtf8Bytes() throws Exception {
    assertEquals("tiny", ModelMetadata.parse(GOLDEN.getBytes(StandardCharsets.UTF_8)).backbone);
    assertThrows(ModelMetadataException.class, () -> ModelMetadata.parse(new byte[] {(byte) 0xC3, (byte) 0x28}));
  }

  private static void assertRejected(String json, String fragment) {
    ModelMetadataException err = assertThrows(ModelMetadataException.class, () -> ModelMetadata.parse(json));
    assertTrue("message '" + err.getMessage() + "' should mention '" + fragment + "'", err.getMessage().contains(fragment));
  }

  @Test
  public void formatVersionMismatchIsClear() {
    assertRejected(GOLDEN.replace("\"format_version\": 1", "\"format_version\": 2"), "unsupported format_version 2");
    assertRejected(GOLDEN.replace("\"format_version\": 1", "\"format_version\": \"1\""), "format_version must be an integer");
    assertRejected(GOLDEN.replace("\"format\": \"tflite-train\"", "\"format\": \"other\""), "format must be");
  }

  @Test
  public void badMetadataIsRejected() {
    assertRejected("not json", "not valid JSON");
    assertRejected("[1]", "must be a JSON object");
    assertRejected(GOLDEN.replace("\"backbone\"", "\"backbone_name\""), "missing key backbone");
    assertRejected(GOLDEN.replace("\"class_capacity\": 10", "\"class_capacity\": 1"), "class_capacity must be in 2..");
    assertRejected(GOLDEN.replace("\"dtype\": \"float32\"", "\"dtype\": \"uint8\""), "input.dtype");
    assertRejected(GOLDEN.replace("\"name\": \"adam\"", "\"name\": \"rmsprop\""), "optimizer.name");
    assertRejected(GOLDEN.replace("\"activation\": \"linear\"", "\"activation\": \"gelu\""), "activation must be one of");
    assertRejected(GOLDEN.replace("\"type\": \"cosine_prototype\"", "\"type\": \"linear\""), "head.type");
    assertRejected(GOLDEN.replace("\"role\": \"final\"", "\"role\": \"final\", \"role\": \"x\""), "duplicate key");
  }

  /** The golden metadata with {@code input.channel_order} set to {@code order} (and channels to {@code channels}). */
  private static String withChannelOrder(Object order, long channels) {
    Map<String, Object> root = JsonText.mutable(Json.parse(GOLDEN));
    Map<String, Object> input = JsonText.mutable(root.get(Contract.F_INPUT));
    root.put(Contract.F_INPUT, input);
    input.put(Contract.F_CHANNEL_ORDER, order);
    input.put(Contract.F_CHANNELS, channels);
    List<Double> one = new ArrayList<>();
    for (long c = 0; c < channels; c++) {
      one.add(1.0);
    }
    input.put(Contract.F_MEAN, one);
    input.put(Contract.F_STD, one);
    return JsonText.write(root);
  }

  @Test
  public void channelOrderIsReadAndValidated() throws Exception {
    assertFalse(GOLDEN.contains(Contract.F_CHANNEL_ORDER));
    assertEquals(Contract.CHANNEL_ORDER_RGB, ModelMetadata.parse(GOLDEN).input.channelOrder);  // absent = rgb
    assertEquals(Contract.CHANNEL_ORDER_BGR,
        ModelMetadata.parse(withChannelOrder(Contract.CHANNEL_ORDER_BGR, 3)).input.channelOrder);
    assertRejected(withChannelOrder("grb", 3), "input.channel_order must be \"rgb\" or \"bgr\"; got \"grb\"");
    assertRejected(withChannelOrder(3L, 3), "input.channel_order must be a string");
    assertRejected(withChannelOrder(Contract.CHANNEL_ORDER_BGR, 1),
        "input.channel_order \"bgr\" needs input.channels 3; got 1");
  }

  @Test
  public void candidatesMustMatchLayerFlags() throws Exception {
    ModelMetadata m = ModelMetadata.parse(GOLDEN);
    String first = m.candidates.get(0);
    String second = m.candidates.get(1);
    // Swap the first two candidates: out of forward order.
    String swapped = GOLDEN.replace("\"candidates\": [\n  \"" + first + "\",\n  \"" + second + "\"",
        "\"candidates\": [\n  \"" + second + "\",\n  \"" + first + "\"");
    assertTrue(!swapped.equals(GOLDEN));
    assertRejected(swapped, "forward order");
    assertRejected(GOLDEN.replace("\"candidates\": [\n  \"" + first + "\",", "\"candidates\": ["),
        "has candidate=true but is not in candidates");
    assertRejected(GOLDEN.replace("\"candidates\": [\n  \"" + first + "\",", "\"candidates\": [\n  \"nope\","),
        "unknown layer");
  }

  @Test
  public void maskOffsetRejectsNonCandidates() throws Exception {
    ModelMetadata m = ModelMetadata.parse(GOLDEN);
    assertThrows(IllegalArgumentException.class, () -> m.maskOffset("stem"));
    assertArrayEquals(new int[] {0}, new int[] {m.maskOffset(m.candidates.get(0))});
    assertEquals(List.copyOf(m.candidates), m.candidates);
  }

  /** One {@code cached_cuts} entry as the exporter writes it (the contract's signature names for the layer). */
  public static Map<String, Object> cutEntry(String layer, long index, long suffixMacs, Long... shape) {
    Map<String, Object> entry = new LinkedHashMap<>();
    entry.put(Contract.F_LOWEST_LAYER, layer);
    entry.put(Contract.F_LOWEST_INDEX, index);
    entry.put(Contract.F_SHAPE, List.of(shape));
    entry.put(Contract.F_FEATURES_SIGNATURE, Contract.FEATURES_PREFIX + layer);
    entry.put(Contract.F_TRAIN_SIGNATURE, Contract.TRAIN_FROM_PREFIX + layer);
    entry.put(Contract.F_INFER_SIGNATURE, Contract.INFER_FROM_PREFIX + layer);
    entry.put(Contract.F_SUFFIX_FORWARD_MACS, suffixMacs);
    return entry;
  }

  /**
   * Metadata JSON with {@code cached_cuts} = {@code entries} (in the given order) and, in {@code signatures},
   * the three signatures of each entry whose lowest_layer is a string, with the contract's tensor names.
   */
  public static String withCachedCuts(String json, List<Map<String, Object>> entries) {
    Map<String, Object> root = JsonText.mutable(Json.parse(json));
    Map<String, Object> signatures = JsonText.mutable(root.get(Contract.F_SIGNATURES));
    for (Map<String, Object> entry : entries) {
      if (entry.get(Contract.F_LOWEST_LAYER) instanceof String) {
        String layer = (String) entry.get(Contract.F_LOWEST_LAYER);
        signatures.put(Contract.FEATURES_PREFIX + layer, io(List.of(Contract.IMAGES), List.of(Contract.ACTIVATIONS)));
        signatures.put(Contract.TRAIN_FROM_PREFIX + layer, io(List.of(Contract.ACTIVATIONS, Contract.LABELS),
            List.of(Contract.LOSS, Contract.ACCURACY)));
        signatures.put(Contract.INFER_FROM_PREFIX + layer, io(List.of(Contract.ACTIVATIONS),
            List.of(Contract.EMBEDDINGS, Contract.LOGITS)));
      }
    }
    root.put(Contract.F_SIGNATURES, signatures);
    root.put(Contract.F_CACHED_CUTS, entries);
    return JsonText.write(root);
  }

  /** The golden tiny model with three cuts, listed out of order: final (12), b02_expand (6), b03_expand (9). */
  public static String goldenWithCuts() {
    return withCachedCuts(GOLDEN, List.of(cutEntry("final", 12, 8_192, 4L, 4L, 16L),
        cutEntry("b02_expand", 6, 90_000, 8L, 8L, 12L), cutEntry("b03_expand", 9, 40_000, 8L, 8L, 12L)));
  }

  private static Map<String, Object> io(List<String> inputs, List<String> outputs) {
    return Map.of(Contract.F_INPUTS, inputs, Contract.F_OUTPUTS, outputs);
  }

  /** The golden metadata with one valid cut at b02_expand, edited by {@code edit}. */
  private static String oneCut(Consumer<Map<String, Object>> edit) {
    Map<String, Object> entry = cutEntry("b02_expand", 6, 90_000, 8L, 8L, 12L);
    edit.accept(entry);
    return withCachedCuts(GOLDEN, List.of(entry));
  }

  @Test
  public void aFileWithoutCachedCutsParses() throws Exception {
    assertFalse(GOLDEN.contains(Contract.F_CACHED_CUTS));
    assertEquals(List.of(), ModelMetadata.parse(GOLDEN).cachedCuts);
    assertEquals(List.of(), ModelMetadata.parse(withCachedCuts(GOLDEN, List.of())).cachedCuts);
  }

  @Test
  public void cachedCutsAreParsedAscending() throws Exception {
    ModelMetadata m = ModelMetadata.parse(goldenWithCuts());
    List<String> layers = new ArrayList<>();
    for (CachedCut cut : m.cachedCuts) {
      layers.add(cut.layer);
      assertEquals(m.table.indexOf(cut.layer), cut.index);
      assertEquals(Contract.FEATURES_PREFIX + cut.layer, cut.featuresSignature);
      assertEquals(Contract.TRAIN_FROM_PREFIX + cut.layer, cut.trainSignature);
      assertEquals(Contract.INFER_FROM_PREFIX + cut.layer, cut.inferSignature);
    }
    assertEquals(List.of("b02_expand", "b03_expand", "final"), layers);
    assertArrayEquals(new int[] {4, 4, 16}, m.cachedCuts.get(2).shape());
    assertEquals(4 * 4 * 4 * 16, m.cachedCuts.get(2).bytesPerImage());
    assertEquals(8_192, m.cachedCuts.get(2).suffixForwardMacs);
    assertThrows(UnsupportedOperationException.class, () -> m.cachedCuts.remove(0));
  }

  @Test
  public void malformedCachedCutsAreRefusedNamingTheField() {
    Map<String, Object> root = JsonText.mutable(Json.parse(GOLDEN));
    root.put(Contract.F_CACHED_CUTS, Map.of());
    assertRejected(JsonText.write(root), "cached_cuts must be an array; got an object");
    root.put(Contract.F_CACHED_CUTS, Json.NULL);
    assertRejected(JsonText.write(root), "cached_cuts must be an array; got null");
    root.put(Contract.F_CACHED_CUTS, List.of(1L));
    assertRejected(JsonText.write(root), "cached_cuts[0] must be a JSON object");

    assertRejected(oneCut(e -> e.remove(Contract.F_SHAPE)), "missing key cached_cuts[0].shape");
    assertRejected(oneCut(e -> e.put(Contract.F_LOWEST_LAYER, "nope")),
        "cached_cuts[0].lowest_layer names unknown layer \"nope\"");
    assertRejected(oneCut(e -> e.put(Contract.F_LOWEST_LAYER, 6L)), "cached_cuts[0].lowest_layer must be a string");
    assertRejected(oneCut(e -> e.put(Contract.F_LOWEST_INDEX, 7L)),
        "cached_cuts[0].lowest_index is 7 but layers has \"b02_expand\" at index 6");
    assertRejected(oneCut(e -> e.put(Contract.F_LOWEST_INDEX, -1L)), "cached_cuts[0].lowest_index must be in 0..");
    assertRejected(oneCut(e -> e.put(Contract.F_SHAPE, List.of(8L, 0L, 12L))), "cached_cuts[0].shape must be positive sizes");
    assertRejected(oneCut(e -> e.put(Contract.F_SHAPE, List.of())), "cached_cuts[0].shape must be positive sizes; got []");
    assertRejected(oneCut(e -> e.put(Contract.F_SHAPE, List.of(8L, "8"))), "cached_cuts[0].shape[1] must be an integer");
    assertRejected(oneCut(e -> e.put(Contract.F_SHAPE, 8L)), "cached_cuts[0].shape must be an array");
    assertRejected(oneCut(e -> e.put(Contract.F_TRAIN_SIGNATURE, Contract.TRAIN_VARIANT_PREFIX + "b02_expand")),
        "cached_cuts[0].train_signature is \"" + Contract.TRAIN_VARIANT_PREFIX + "b02_expand\"; expected \""
            + Contract.TRAIN_FROM_PREFIX + "b02_expand\"");
    assertRejected(oneCut(e -> e.put(Contract.F_FEATURES_SIGNATURE, Contract.FEATURES_PREFIX + "b03_expand")),
        "cached_cuts[0].features_signature is");
    assertRejected(oneCut(e -> e.put(Contract.F_INFER_SIGNATURE, Contract.INFER)), "cached_cuts[0].infer_signature is");
    assertRejected(oneCut(e -> e.put(Contract.F_SUFFIX_FORWARD_MACS, -5L)),
        "cached_cuts[0].suffix_forward_macs must be >= 0; got -5");
    assertRejected(oneCut(e -> e.put(Contract.F_SUFFIX_FORWARD_MACS, 1.5)),
        "cached_cuts[0].suffix_forward_macs must be an integer");
    Map<String, Object> cut = cutEntry("b02_expand", 6, 90_000, 8L, 8L, 12L);
    assertRejected(withCachedCuts(GOLDEN, List.of(cut, cut)), "cached_cuts lists layer \"b02_expand\" twice");
    // every refusal is one line
    ModelMetadataException err = assertThrows(ModelMetadataException.class,
        () -> ModelMetadata.parse(oneCut(e -> e.put(Contract.F_LOWEST_INDEX, 7L))));
    assertFalse(err.getMessage().contains("\n"));
  }

  /** The golden metadata with one cut at b02_expand carrying the episode and accumulation signatures, edited. */
  private static String episodeCut(Consumer<Map<String, Object>> editEntry, Consumer<Map<String, Object>> editRoot) {
    Map<String, Object> entry = cutEntry("b02_expand", 6, 90_000, 8L, 8L, 12L);
    entry.put(Contract.F_EPISODE_SIGNATURE, Contract.EPISODE_FROM_PREFIX + "b02_expand");
    entry.put(Contract.F_ACCUMULATE_SIGNATURE, Contract.ACCUMULATE_FROM_PREFIX + "b02_expand");
    editEntry.accept(entry);
    Map<String, Object> root = JsonText.mutable(Json.parse(withCachedCuts(GOLDEN, List.of(entry))));
    root.put(Contract.F_APPLY_ACCUMULATED_SIGNATURE, Contract.APPLY_ACCUMULATED);
    editRoot.accept(root);
    return JsonText.write(root);
  }

  @Test
  public void episodeAndAccumulationSignaturesAreOptionalAndChecked() throws Exception {
    ModelMetadata m = ModelMetadata.parse(episodeCut(e -> { }, r -> { }));
    assertEquals(Contract.EPISODE_FROM_PREFIX + "b02_expand", m.cachedCuts.get(0).episodeSignature);
    assertEquals(Contract.ACCUMULATE_FROM_PREFIX + "b02_expand", m.cachedCuts.get(0).accumulateSignature);
    assertEquals(Contract.APPLY_ACCUMULATED, m.applyAccumulatedSignature);
    ModelMetadata older = ModelMetadata.parse(oneCut(e -> { }));
    assertNull(older.cachedCuts.get(0).episodeSignature);
    assertNull(older.cachedCuts.get(0).accumulateSignature);
    assertNull(older.applyAccumulatedSignature);
    assertRejected(episodeCut(e -> e.put(Contract.F_EPISODE_SIGNATURE, Contract.TRAIN_FROM_PREFIX + "b02_expand"),
        r -> { }), "cached_cuts[0].episode_signature is \"" + Contract.TRAIN_FROM_PREFIX + "b02_expand\"; expected");
    assertRejected(episodeCut(e -> e.put(Contract.F_ACCUMULATE_SIGNATURE, 3L), r -> { }),
        "cached_cuts[0].accumulate_signature must be a string");
    assertRejected(episodeCut(e -> { }, r -> r.remove(Contract.F_APPLY_ACCUMULATED_SIGNATURE)),
        "cached_cuts[b02_expand] has an accumulate_signature but the metadata lacks apply_accumulated_signature");
    assertRejected(episodeCut(e -> { }, r -> r.put(Contract.F_APPLY_ACCUMULATED_SIGNATURE, Contract.TRAIN_STEP)),
        "apply_accumulated_signature is \"train_step\"; expected \"apply_accumulated\"");
  }
}
