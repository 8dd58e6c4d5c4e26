package org.tflitetrain.core.model;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.Test;
import org.tflitetrain.core.Resources;
import org.tflitetrain.core.cost.Optimizer;

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
}
