package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tflitetrain.core.Resources;
import org.tflitetrain.core.json.Json;
import org.tflitetrain.core.model.CachedCut;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.ModelMetadata;
import org.tflitetrain.core.model.ModelMetadataTest;

/**
 * The checkpoint's replay section (issue 42) on the JVM, pinned to Python by the golden
 * {@code checkpoint_replay.json} ({@code tools.golden.checkpoint_vectors}): Java reads the checkpoint Python
 * wrote, finds every value (the activations bit for bit, the row -> image index) and writes it back byte for byte;
 * a version-1 memory (one plain view per row) still loads; the replay rules keep Python's images and views; bad or
 * foreign replay data is refused in one line naming the field.
 */
public class CheckpointReplayTest {
  private static final Map<String, Object> GOLDEN = Resources.obj(Json.parse(Resources.text("/golden/checkpoint_replay.json")));

  private static byte[] goldenBytes() {
    return Base64.getDecoder().decode((String) GOLDEN.get("checkpoint_base64"));
  }

  private static Map<String, Object> expected() {
    return Resources.obj(GOLDEN.get("expected"));
  }

  @Test
  public void readsThePythonCheckpointAndWritesItBackByteForByte() throws Exception {
    byte[] data = goldenBytes();
    Checkpoint checkpoint = Checkpoint.decode(data, "golden");
    Map<String, Object> expected = expected();
    assertEquals(expected.get(Contract.F_MODEL_ID), checkpoint.modelId);
    assertEquals(expected.get(Contract.CK_CLASS_NAMES), checkpoint.classNames);
    Map<String, Object> selection = Resources.obj(expected.get(Contract.CK_SELECTION));
    assertEquals(selection.keySet(), checkpoint.selection.keySet());
    for (Map.Entry<String, Object> entry : selection.entrySet()) {
      assertArrayEquals(longs(entry.getValue()), Arrays.stream(checkpoint.selection.get(entry.getKey()))
          .asLongStream().toArray());
    }
    ReplayMemory replay = checkpoint.replay;
    Map<String, Object> section = Resources.obj(expected.get(Contract.CK_REPLAY));
    assertEquals(section.get(Contract.RP_CUT_LAYER), replay.cutLayer);
    assertEquals(((Long) section.get(Contract.RP_CUT_INDEX)).intValue(), replay.cutIndex);
    assertArrayEquals(longs(section.get(Contract.RP_ACTIVATION_SHAPE)), Arrays.stream(replay.shape()).asLongStream()
        .toArray());
    assertEquals(section.get(Contract.RP_BUDGET_BYTES), replay.budgetBytes);
    assertArrayEquals(longs(expected.get(Contract.REPLAY_LABELS)), Arrays.stream(replay.labels()).asLongStream()
        .toArray());
    assertArrayEquals(longs(expected.get(Contract.REPLAY_IMAGES)), Arrays.stream(replay.images()).asLongStream()
        .toArray());
    assertEquals(3, replay.numImages());
    assertArrayEquals(new int[] {1, 0, 1}, replay.furtherViews());
    assertArrayEquals(new int[] {2, 0, 1}, replay.imageLabels());
    long[] bits = longs(expected.get("replay_activation_bits"));
    float[] values = replay.activations.floats();
    assertEquals(bits.length, values.length);
    for (int i = 0; i < values.length; i++) {
      assertEquals("activation " + i, bits[i], Integer.toUnsignedLong(Float.floatToRawIntBits(values[i])));
    }
    assertTrue(Float.floatToRawIntBits(values[0]) == 0x80000000);  // -0.0 survives
    assertEquals(Resources.obj(expected.get("array_shapes")).keySet(), checkpoint.arrays.keySet());
    // the replay arrays are not state arrays: a restore never writes them
    assertTrue(!checkpoint.arrays.containsKey(Contract.REPLAY_ACTIVATIONS));

    byte[] again = checkpoint.encode();
    assertEquals(((Long) expected.get("size")).intValue(), again.length);
    assertArrayEquals("Java writes the Python checkpoint back identically", data, again);
  }

  @Test
  public void aVersionOneMemoryStillLoads() throws Exception {
    Checkpoint old = Checkpoint.decode(Base64.getDecoder().decode((String) GOLDEN.get("one_view_base64")), "old");
    assertTrue(header(Base64.getDecoder().decode((String) GOLDEN.get("one_view_base64")))
        .contains("\"format_version\": 1, \"rule\""));
    ReplayMemory replay = old.replay;
    assertEquals(3, replay.size());
    assertEquals(3, replay.numImages());
    assertArrayEquals(new int[] {0, 1, 2}, replay.images());
    assertArrayEquals(new int[] {2, 0, 1}, replay.labels());
    float[] golden = Checkpoint.decode(goldenBytes(), "golden").replay.activations.floats();
    assertArrayEquals(Arrays.copyOf(golden, 3 * 256), replay.activations.floats(), 0f);
    // written again, it is a version-2 memory of the same rows
    ReplayMemory again = Checkpoint.decode(old.encode(), "again").replay;
    assertTrue(header(old.encode()).contains("\"format_version\": 2, \"rule\""));
    assertArrayEquals(replay.activations.floats(), again.activations.floats(), 0f);
    assertArrayEquals(replay.images(), again.images());
  }

  @Test
  public void theMemoryFitsTheGoldenModelWithCutsOnly() throws Exception {
    Checkpoint checkpoint = Checkpoint.decode(goldenBytes(), "golden");
    ModelMetadata withCuts = ModelMetadata.parse(ModelMetadataTest.goldenWithCuts());
    CachedCut cut = checkpoint.replay.requireCut(withCuts);
    assertEquals("final", cut.layer);
    ModelMetadata without = AdaptationDriverTest.metadata();
    CheckpointException err = assertThrows(CheckpointException.class, () -> checkpoint.replay.requireCut(without));
    assertEquals("checkpoint header field replay.cut_layer: 'final' is not a cached cut of this model (it has none)",
        err.getMessage());
  }

  @Test
  public void keepsTheRowsPythonKeeps() {
    for (Object item : Resources.list(GOLDEN.get("keep_rows"))) {
      Map<String, Object> c = Resources.obj(item);
      int[] labels = Arrays.stream(longs(c.get("labels"))).mapToInt(v -> (int) v).toArray();
      int[] kept = ReplayMemory.keepRows(labels, ((Long) c.get("capacity")).intValue());
      assertArrayEquals(c.toString(), longs(c.get("kept")), Arrays.stream(kept).asLongStream().toArray());
    }
  }

  @Test
  public void keepsTheViewsPythonKeeps() {
    for (Object item : Resources.list(GOLDEN.get("keep_views"))) {
      Map<String, Object> c = Resources.obj(item);
      int[] labels = Arrays.stream(longs(c.get("labels"))).mapToInt(v -> (int) v).toArray();
      int[] available = Arrays.stream(longs(c.get("available"))).mapToInt(v -> (int) v).toArray();
      int[] kept = ReplayMemory.keepViews(labels, available, ((Long) c.get("capacity")).intValue());
      assertArrayEquals(c.toString(), longs(c.get("kept")), Arrays.stream(kept).asLongStream().toArray());
    }
  }

  @Test
  public void rememberCarriesTheStoredViewsOn() {
    // Python's hand-computed case (test_replay_memory): images 30 (class 0), 10 (class 0, view 11), 20 (class 1,
    // view 21); a run adds image 40 of class 1 (Java draws no views) under 5 rows: the 4 plain views, then pass 1
    // offers image 10's view 11 (class 0) and image 20's view 21 (class 1): both fit
    CachedCut cut = new CachedCut("final", 12, new int[] {1}, "features_final", "train_step_from_final",
        "infer_from_final", 1L);
    ReplayMemory memory = new ReplayMemory("final", 12, new int[] {1}, 20, Tensor.ofFloats(new int[] {5, 1},
        new float[] {30, 10, 20, 11, 21}), new int[] {0, 0, 1, 0, 1}, new int[] {0, 1, 2, 1, 2});
    assertEquals(3, memory.numImages());
    ReplayMemory next = ReplayMemory.remember(memory, cut, Tensor.ofFloats(new int[] {1, 1}, new float[] {40}),
        new int[] {1}, 24, 0);
    assertArrayEquals(new float[] {30, 10, 20, 40, 11, 21}, next.activations.floats(), 0f);
    assertArrayEquals(new int[] {0, 1, 2, 3, 1, 2}, next.images());
    assertArrayEquals(new int[] {0, 0, 1, 1, 0, 1}, next.labels());
    // one row less: class 0's view (its turn comes first in the pass) stays, class 1's leaves
    ReplayMemory tight = ReplayMemory.remember(memory, cut, Tensor.ofFloats(new int[] {1, 1}, new float[] {40}),
        new int[] {1}, 20, 0);
    assertArrayEquals(new float[] {30, 10, 20, 40, 11}, tight.activations.floats(), 0f);
    assertArrayEquals(new int[] {0, 1, 2, 3, 1}, tight.images());
    IllegalArgumentException order = assertThrows(IllegalArgumentException.class, () -> new ReplayMemory("final", 12,
        new int[] {1}, 20, Tensor.ofFloats(new int[] {3, 1}, new float[3]), new int[] {0, 1, 0},
        new int[] {0, 2, 1}));
    assertTrue(order.getMessage(), order.getMessage().contains("must begin with 0, 1, ..., I-1"));
  }

  @Test
  public void rememberBalancesAndLineageCutPicksTheSelectionsCut() {
    CachedCut cut = new CachedCut("final", 12, new int[] {1}, "features_final", "train_step_from_final",
        "infer_from_final", 1L);
    float[] old = new float[12];
    int[] oldLabels = new int[12];
    for (int i = 0; i < 12; i++) {
      old[i] = i;
      oldLabels[i] = i / 4;
    }
    ReplayMemory memory = new ReplayMemory("final", 12, new int[] {1}, 48, Tensor.ofFloats(new int[] {12, 1}, old),
        oldLabels);
    ReplayMemory next = ReplayMemory.remember(memory, cut, Tensor.ofFloats(new int[] {4, 1}, new float[] {100, 101,
        102, 103}), new int[] {3, 3, 3, 3}, 48, 0);
    assertArrayEquals(new int[] {3, 3, 3, 3}, next.classCounts(4));
    // each old class drops its oldest row; the kept rows stay oldest first
    assertArrayEquals(new float[] {1, 2, 3, 5, 6, 7, 9, 10, 11}, Arrays.copyOf(next.activations.floats(), 9), 0f);
    assertNull(ReplayMemory.remember(null, cut, Tensor.ofFloats(new int[] {1, 1}, new float[] {1}), new int[] {0}, 3, 0));

    List<CachedCut> cuts = List.of(cut, new CachedCut("b03_expand", 9, new int[] {1}, "f", "t", "i", 1L),
        new CachedCut("b02_expand", 6, new int[] {1}, "f", "t", "i", 1L));
    assertEquals("b03_expand", ReplayMemory.lineageCut(cuts, 10).layer);
    assertEquals("b02_expand", ReplayMemory.lineageCut(cuts, 3).layer);
    assertEquals("b02_expand", ReplayMemory.lineageCut(cuts, -1).layer);
    assertNull(ReplayMemory.lineageCut(List.of(), 10));
    assertEquals(25, ReplayMemory.capacity(100, 4));
  }

  @Test
  public void continuationMatchesClassesByNameAndRestrictsTheLayers() throws Exception {
    Checkpoint checkpoint = Checkpoint.decode(goldenBytes(), "golden");
    Continuation start = Continuation.of(checkpoint, List.of("owl", "bee", "cat", "ant"), true);
    assertEquals(List.of("cat", "dog", "owl", "bee", "ant"), start.classNames);
    assertArrayEquals(new int[] {2, 3, 0, 4, 4}, start.headLabels(new int[] {0, 1, 2, 3, 3}));
    ModelMetadata m = ModelMetadata.parse(ModelMetadataTest.goldenWithCuts());
    assertEquals(List.of("final"), start.candidates(m));  // the memory's cut is final (12)
    assertEquals(m.candidates, Continuation.of(checkpoint, List.of("bee"), false).candidates(m));
    Selection union = Continuation.savedSelection(checkpoint.selection,
        new Selection(m, Map.of("final", new int[] {0, 4}, "b03_project", new int[] {2})), m);
    assertEquals(List.of("b03_project", "final"), new ArrayList<>(union.channels().keySet()));
    assertArrayEquals(new int[] {0, 1, 4}, union.channels().get("final"));
    IllegalArgumentException repeated = assertThrows(IllegalArgumentException.class,
        () -> Continuation.of(checkpoint, List.of("a", "a"), true));
    assertTrue(repeated.getMessage().contains("matched by name"));
    // a fixed policy outside the allowed layers is refused by the default candidates-aware select
    SelectionPolicy fixed = new FixedSelectionPolicy("fixed", new Selection(m, Map.of("b03_project", new int[] {1})));
    IllegalArgumentException outside = assertThrows(IllegalArgumentException.class,
        () -> fixed.select(m, null, null, 1, start.candidates(m)));
    assertTrue(outside.getMessage(), outside.getMessage().contains("selected b03_project, which this run may not update"));
  }

  @Test
  public void badOrForeignReplayDataIsRefusedInOneLine() throws Exception {
    String header = header(goldenBytes());
    Map<String, String> cases = new LinkedHashMap<>();
    cases.put(header.replace("\"format_version\": 2, \"rule\"", "\"format_version\": 3, \"rule\""),
        "field replay.format_version: must be in 1..2; got 3");
    cases.put(header.replace("\"format_version\": 2, \"rule\"", "\"format_version\": 1, \"rule\""),
        "field arrays['replay_images']: is not part of a replay section of version 1");
    cases.put(header.replace("\"class_balanced_recent\"", "\"reservoir\""),
        "field replay.rule: must be one of class_balanced_recent");
    cases.put(header.replace("\"budget_bytes\": 5120", "\"budget_bytes\": 100"), "over replay.budget_bytes 100");
    cases.put(header.replace("\"activation_shape\": [4, 4, 16]", "\"activation_shape\": [4, 4, 17]"),
        "field arrays['replay_activations']: must be float32 [R >= 1, 4, 4, 17]");
    cases.put(header.replace("\"budget_bytes\": 5120,", "\"budget_bytes\": 5120, \"extra\": 1,"),
        "field replay.extra: is not a known field");
    String withoutSection = header.substring(0, header.indexOf(", \"replay\": {"))
        + header.substring(header.indexOf("}", header.indexOf(", \"replay\": {")) + 1);
    cases.put(withoutSection, "field arrays['replay_activations']: is replay data without the header field replay");
    for (Map.Entry<String, String> c : cases.entrySet()) {
      CheckpointException err = assertThrows(CheckpointException.class,
          () -> Checkpoint.decode(resealed(c.getKey(), goldenBytes()), "c.ckpt"));
      assertTrue(err.getMessage(), err.getMessage().startsWith("c.ckpt: checkpoint header ")
          && err.getMessage().contains(c.getValue()) && !err.getMessage().contains("\n"));
    }
    // labels outside the head (payload bytes), and NaN activations
    byte[] data = goldenBytes();
    int labelsAt = payloadStart(data) + arrayOffset(header, Contract.REPLAY_LABELS);
    ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN).putInt(labelsAt, 3);
    CheckpointException labels = assertThrows(CheckpointException.class, () -> Checkpoint.decode(reseal(data), "c"));
    assertEquals("c: checkpoint array 'replay_labels' holds class 3; the head has num_classes 3", labels.getMessage());
    byte[] nan = goldenBytes();
    ByteBuffer.wrap(nan).order(ByteOrder.LITTLE_ENDIAN).putFloat(payloadStart(nan)
        + arrayOffset(header, Contract.REPLAY_ACTIVATIONS) + 8, Float.NaN);
    CheckpointException values = assertThrows(CheckpointException.class, () -> Checkpoint.decode(reseal(nan), "c"));
    assertEquals("c: checkpoint array 'replay_activations' holds NaN or Inf", values.getMessage());
    // a row -> image index out of order, and a view labelled unlike its image (golden images [0, 1, 2, 0, 2])
    int imagesAt = payloadStart(data) + arrayOffset(header, Contract.REPLAY_IMAGES);
    byte[] disorder = goldenBytes();
    ByteBuffer.wrap(disorder).order(ByteOrder.LITTLE_ENDIAN).putInt(imagesAt + 12, 2).putInt(imagesAt + 16, 0);
    CheckpointException order = assertThrows(CheckpointException.class, () -> Checkpoint.decode(reseal(disorder), "c"));
    assertEquals("c: checkpoint array 'replay_images' must continue with image indices 0..I-1 in ascending order "
        + "(the further views, grouped by image)", order.getMessage());
    byte[] mislabelled = goldenBytes();
    ByteBuffer.wrap(mislabelled).order(ByteOrder.LITTLE_ENDIAN).putInt(imagesAt + 16, 0);
    CheckpointException label = assertThrows(CheckpointException.class,
        () -> Checkpoint.decode(reseal(mislabelled), "c"));
    assertEquals("c: checkpoint array 'replay_labels' labels a row unlike its image ('replay_images'): a view's "
        + "class is its image's", label.getMessage());
    // the golden memory at a cut index this model does not have: refused before any state is written
    Checkpoint foreign = Checkpoint.decode(resealed(header.replace("\"cut_index\": 12", "\"cut_index\": 11"),
        goldenBytes()), "c");
    ModelMetadata m = ModelMetadata.parse(ModelMetadataTest.goldenWithCuts());
    CheckpointException cut = assertThrows(CheckpointException.class, () -> foreign.restore(m, Map.of()));
    assertEquals("checkpoint header field replay.cut_index: is 11; layer 'final' has index 12 in this model",
        cut.getMessage());
  }

  private static long[] longs(Object list) {
    return Resources.list(list).stream().mapToLong(v -> ((Number) v).longValue()).toArray();
  }

  private static String header(byte[] data) {
    int length = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN).getInt(12);
    return new String(data, 16, length, StandardCharsets.UTF_8);
  }

  private static int payloadStart(byte[] data) {
    return 16 + ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN).getInt(12);
  }

  private static int arrayOffset(String header, String name) {
    for (Object entry : Resources.list(Resources.obj(Json.parse(header)).get(Contract.CK_ARRAYS))) {
      Map<String, Object> e = Resources.obj(entry);
      if (name.equals(e.get(Contract.CK_NAME))) {
        return ((Long) e.get(Contract.CK_OFFSET)).intValue();
      }
    }
    throw new IllegalArgumentException("no array " + name);
  }

  /** {@code original}'s payload under {@code header}, with a valid digest. */
  private static byte[] resealed(String header, byte[] original) throws Exception {
    byte[] head = header.getBytes(StandardCharsets.UTF_8);
    int start = payloadStart(original);
    byte[] payload = Arrays.copyOfRange(original, start, original.length - 32);
    ByteBuffer body = ByteBuffer.allocate(16 + head.length + payload.length + 32).order(ByteOrder.LITTLE_ENDIAN);
    body.put(original, 0, 12).putInt(head.length).put(head).put(payload);
    return reseal(body.array());
  }

  private static byte[] reseal(byte[] data) throws Exception {
    byte[] digest = MessageDigest.getInstance("SHA-256").digest(Arrays.copyOf(data, data.length - 32));
    System.arraycopy(digest, 0, data, data.length - 32, 32);
    return data;
  }
}
