package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tflitetrain.core.model.ModelMetadata;

/**
 * Checkpoint headers with a valid digest but fields of the wrong type, out of range or inconsistent are refused
 * by the declared schema ({@link CheckpointHeader}) with one line naming the field, never a ClassCastException,
 * NullPointerException or IndexOutOfBoundsException; the same cases as {@code tests/runtime/checkpoint/test_checkpoint_schema.py}.
 */
public class CheckpointHeaderTest {
  private static final class Setup {
    final ModelMetadata m;
    final Map<String, Tensor> exported;
    final byte[] data;
    final String layer;

    Setup() throws Exception {
      m = AdaptationDriverTest.metadata();
      AdaptationDriver driver = new AdaptationDriver(m, AdaptationDriverTest.checked(new AdaptationDriverTest.FakeRunner(m)));
      exported = new LinkedHashMap<>(driver.getState());
      exported.put("prototypes", Tensor.ofFloats(new int[] {m.classCapacity, m.featureDim},
          new float[m.classCapacity * m.featureDim]));
      Map<String, Tensor> adapted = new LinkedHashMap<>(exported);
      float[] protos = new float[m.classCapacity * m.featureDim];
      adapted.put("prototypes", Tensor.ofFloats(new int[] {m.classCapacity, m.featureDim}, protos));
      adapted.put("learning_rate", Tensor.scalar(0.5f));
      layer = m.candidates.get(0);
      data = Checkpoint.encode(m, adapted, new Selection(m, Map.of(layer, new int[] {1})), "fixed", false,
          List.of("a", "b", "c"));
    }

    String header() {
      int length = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN).getInt(12);
      return new String(data, 16, length, StandardCharsets.UTF_8);
    }

    /** The checkpoint with {@code header} instead of its own, re-sealed (a valid digest). */
    byte[] withHeader(String header) throws Exception {
      int length = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN).getInt(12);
      byte[] head = header.getBytes(StandardCharsets.UTF_8);
      int payload = data.length - 16 - length - 32;
      ByteBuffer out = ByteBuffer.allocate(16 + head.length + payload + 32).order(ByteOrder.LITTLE_ENDIAN);
      out.put(data, 0, 8).putInt(1).putInt(head.length).put(head).put(data, 16 + length, payload);
      byte[] bytes = out.array();
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      sha.update(bytes, 0, bytes.length - 32);
      System.arraycopy(sha.digest(), 0, bytes, bytes.length - 32, 32);
      return bytes;
    }
  }

  private static void refused(Setup s, String from, String to, String... fragments) throws Exception {
    String header = s.header();
    assertTrue("fixture header lacks " + from + ": " + header, header.contains(from));
    refusedHeader(s, header.replace(from, to), fragments);
  }

  private static void refusedHeader(Setup s, String header, String... fragments) throws Exception {
    byte[] bad = s.withHeader(header);
    CheckpointException err = assertThrows(CheckpointException.class, () -> {
      Checkpoint checkpoint = Checkpoint.decode(bad, "mem.ckpt");
      checkpoint.restore(s.m, s.exported);
    });
    String message = err.getMessage();
    assertFalse("one line: " + message, message.contains("\n"));
    for (String fragment : fragments) {
      assertTrue(fragment + " not in: " + message, message.contains(fragment));
    }
  }

  @Test
  public void theFixtureHeaderIsValidAndRoundTrips() throws Exception {
    Setup s = new Setup();
    Checkpoint checkpoint = Checkpoint.decode(s.withHeader(s.header()), "mem.ckpt");
    assertEquals(List.of("a", "b", "c"), checkpoint.classNames);
    checkpoint.restore(s.m, s.exported);
  }

  @Test
  public void channelsOfTheWrongType() throws Exception {
    Setup s = new Setup();
    String channels = "\"channels\": {\"" + s.layer + "\": [1]}";
    refused(s, channels, "\"channels\": [1]", "mem.ckpt: checkpoint header field selection.channels: must be an object",
        "got a list");
    refused(s, channels, "\"channels\": null", "field selection.channels", "got null");
    refused(s, channels, "\"channels\": {\"" + s.layer + "\": 1}", "field selection.channels['" + s.layer + "']",
        "must be a list");
    refused(s, channels, "\"channels\": {\"" + s.layer + "\": [\"1\"]}", "selection.channels['" + s.layer + "'][0]",
        "must be an integer");
    refused(s, channels, "\"channels\": {\"" + s.layer + "\": [2, 1]}", "must be sorted and unique");
    refused(s, channels, "\"channels\": {\"" + s.layer + "\": []}", "must have 1..");
    refused(s, channels, "\"channels\": {}", "lacks the selected layer");
    refused(s, channels, "\"channels\": {\"" + s.layer + "\": [1], \"zzz\": [0]}", "names layer \"zzz\"");
  }

  @Test
  public void inconsistentWithTheModelOrTheHead() throws Exception {
    Setup s = new Setup();
    refused(s, "\"" + s.layer + "\": [1]", "\"" + s.layer + "\": [1, 99999]", "has channel 99999", "output channels");
    refused(s, "\"class_names\": [\"a\", \"b\", \"c\"]", "\"class_names\": [\"a\"]",
        "field class_names: names 1 classes; the head has num_classes 3");
    refused(s, "\"class_names\": [\"a\", \"b\", \"c\"]", "\"class_names\": [1, 2, 3]", "field class_names[0]",
        "must be a string");
    refused(s, "\"layers\": [\"" + s.layer + "\"]", "\"layers\": [\"nope\"]", "names layer \"" + s.layer + "\"");
  }

  @Test
  public void fieldsOfTheWrongTypeOrRange() throws Exception {
    Setup s = new Setup();
    refused(s, "\"layers\": [\"" + s.layer + "\"]", "\"layers\": \"abc\"", "field selection.layers: must be a list");
    refused(s, "\"include_optimizer\": false", "\"include_optimizer\": 0", "field include_optimizer: must be true or false");
    refused(s, "\"format_version\": 1, \"include", "\"format_version\": 1.0, \"include", "field format_version: must be 1");
    refused(s, "\"payload_bytes\": ", "\"payload_bytes\": -", "field payload_bytes: must be in 0..");
    refused(s, "\"offset\": 0", "\"offset\": \"0\"", "field arrays[0].offset: must be an integer");
    refused(s, "\"offset\": 0", "\"offset\": 99999999", "field arrays[0].offset", "beyond payload_bytes");
    refusedHeader(s, s.header().replaceFirst("\"arrays\": \\[.*?\\], \"class_names\"", "\"arrays\": null, \"class_names\""),
        "field arrays: must be a list");
    refused(s, "\"model_id\": ", "\"extra\": 1, \"model_id\": ", "field extra: is not a known field");
    refused(s, "\"shape\": []", "\"shape\": [-1]", "shape[0]: must be in 0..");
    refused(s, "\"shape\": []", "\"shape\": [2]", "nbytes", "takes 8 bytes");
    refused(s, "\"name\": \"learning_rate\"", "\"name\": \"learning_rat\"", "field arrays: has no \"learning_rate\" array");
    refusedHeader(s, s.header().replaceFirst("\"model_id\": \"[0-9a-f]*\"", "\"model_id\": 7"),
        "field model_id: must be a string; got 7");
  }

  @Test
  public void longNamesAreWrittenAtomically() throws Exception {
    java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("ckpt");
    for (String name : List.of("c".repeat(240), "c".repeat(255), "\u00e9".repeat(127), "short.ckpt")) {
      java.nio.file.Path path = dir.resolve(name);
      Checkpoint.writeAtomic(path, new byte[] {1, 2, 3});
      assertEquals(3, java.nio.file.Files.size(path));
      assertTrue(Checkpoint.tempStem(name).getBytes(StandardCharsets.UTF_8).length + Checkpoint.TEMP_TAIL_BYTES
          <= Checkpoint.NAME_MAX);
    }
    try (java.util.stream.Stream<java.nio.file.Path> files = java.nio.file.Files.list(dir)) {
      assertEquals("no temp file left", 4, files.count());
    }
    assertEquals("short.ckpt", Checkpoint.tempStem("short.ckpt"));
    assertFalse(Checkpoint.tempStem("x".repeat(250) + "1").equals(Checkpoint.tempStem("x".repeat(250) + "2")));
  }

  @Test
  public void malformedJsonAndLengthsAreOneLine() throws Exception {
    Setup s = new Setup();
    refused(s, "{", "[", "malformed checkpoint header");
    refused(s, "{", "{".repeat(5000), "malformed checkpoint header");
  }
}
