package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tflitetrain.core.model.BakedClassifierMetadata;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.ModelMetadata;
import org.tflitetrain.core.model.ModelMetadataException;

/**
 * The Java core reads and runs a baked classifier ({@code tflite-train bake}): Python adapts the tiny fixture
 * on real Fashion-MNIST images and bakes the checkpoint (through the bridge); {@link BakedClassifierMetadata#load}
 * accepts the file (seal, metadata, graph) and {@link BakedClassifier} runs its one signature through a bridge
 * on the baked file, which calls the interpreter's standard signature runner. Its logits equal what Python's
 * {@code predict} computes with the checkpoint (within 1e-5 of the largest), the classes are the checkpoint's.
 * The loader refuses the export itself, a flipped byte and a checkpoint-less metadata field.
 */
public class BakedClassifierTest {
  private static final String FIXTURE = "tiny_adam_33";

  @Rule
  public TemporaryFolder tmp = new TemporaryFolder();

  private static Path fixture() {
    return BridgeRunner.fixture(FIXTURE);
  }

  @Test
  public void runsABakedClassifierLikePythonsPredict() throws Exception {
    Path model = fixture();
    Path checkpoint = tmp.getRoot().toPath().resolve("m.ckpt");
    Path baked = tmp.getRoot().toPath().resolve("classifier.tflite");
    Tensor query;
    float[][] expected;
    try (BridgeRunner bridge = new BridgeRunner(model)) {
      Map<String, Object> episode = bridge.call("{\"op\": \"episode\", \"ways\": 3, \"shots\": 3, \"queries\": 4, \"seed\": 0}");
      query = BridgeRunner.tensorOf(episode.get("query"));
      bridge.call("{\"op\": \"trainer\", \"save\": " + BridgeRunner.quote(checkpoint.toString()) + ", \"images\": "
          + BridgeRunner.tensor(BridgeRunner.tensorOf(episode.get("support"))) + ", \"labels\": "
          + BridgeRunner.tensor(BridgeRunner.tensorOf(episode.get("support_labels"))) + ", \"queries\": "
          + BridgeRunner.tensor(query) + ", \"iterations\": 3, \"batch_size\": 9}");
      bridge.call("{\"op\": \"bake\", \"checkpoint\": " + BridgeRunner.quote(checkpoint.toString()) + ", \"out\": "
          + BridgeRunner.quote(baked.toString()) + "}");
      Tensor logits = BridgeRunner.tensorOf(bridge.call("{\"op\": \"predict_logits\", \"checkpoint\": "
          + BridgeRunner.quote(checkpoint.toString()) + ", \"queries\": " + BridgeRunner.tensor(query) + "}")
          .get("logits"));
      expected = rows(logits.floats(), logits.shape()[1]);
    }
    BakedClassifierMetadata metadata = BakedClassifierMetadata.load(ByteBuffer.wrap(Files.readAllBytes(baked)));
    assertEquals(List.of("0", "1", "2"), metadata.classNames);
    ModelMetadata export = ModelMetadata.load(ByteBuffer.wrap(Files.readAllBytes(model)));
    assertEquals(export.modelId, metadata.modelId);
    assertEquals(export.headScale, metadata.headScale, 0);
    assertEquals(export.input.height, metadata.input.height);
    assertEquals(export.input.rangeHigh, metadata.input.rangeHigh, 0);
    assertTrue(metadata.checkpointSha256.matches("[0-9a-f]{64}"));

    float[][] got;
    String[] classes;
    try (BridgeRunner runner = new BridgeRunner(baked)) {
      BakedClassifier classifier = new BakedClassifier(metadata, runner);
      got = classifier.logits(query, 5);
      classes = classifier.classify(query, 12);
    }
    assertEquals(expected.length, got.length);
    double largest = 0;
    for (float[] row : expected) {
      for (float v : row) {
        largest = Math.max(largest, Math.abs(v));
      }
    }
    for (int i = 0; i < got.length; i++) {
      assertArrayEquals("image " + i, expected[i], got[i], (float) (1e-5 * largest));
      assertEquals(metadata.classNames.get(AdaptationDriver.argmax(expected[i])), classes[i]);
    }
  }

  @Test
  public void refusesAnExportADamagedFileAndABadField() throws Exception {
    Path model = fixture();
    ModelMetadataException export = assertThrows(ModelMetadataException.class,
        () -> BakedClassifierMetadata.load(ByteBuffer.wrap(Files.readAllBytes(model))));
    assertTrue(export.getMessage(), export.getMessage().contains("an exported model: bake it"));
    byte[] bytes = Files.readAllBytes(model);
    bytes[bytes.length / 2] ^= 1;
    ModelMetadataException damaged = assertThrows(ModelMetadataException.class,
        () -> BakedClassifierMetadata.load(ByteBuffer.wrap(bytes)));
    assertTrue(damaged.getMessage(), damaged.getMessage().contains(Contract.CHECKSUM_NAME));
    String json = "{\"format\": \"" + Contract.BAKED_FORMAT + "\", \"format_version\": 1, \"class_names\": [\"a\"], "
        + "\"input\": {\"height\": 8, \"width\": 8, \"channels\": 3, \"dtype\": \"float32\", \"range\": [0, 1], "
        + "\"mean\": [0, 0, 0], \"std\": [1, 1, 1]}, \"head\": {\"type\": \"" + Contract.HEAD_TYPE + "\", "
        + "\"scale\": 10}, \"model_id\": \"m\", \"checkpoint_sha256\": \"abc\"}";
    ModelMetadataException field = assertThrows(ModelMetadataException.class,
        () -> BakedClassifierMetadata.parse(json.getBytes(StandardCharsets.UTF_8)));
    assertTrue(field.getMessage(), field.getMessage().startsWith(Contract.F_CHECKPOINT_SHA256 + " must be 64"));
    BakedClassifierMetadata ok = BakedClassifierMetadata.parse(
        json.replace("\"abc\"", "\"" + "0".repeat(64) + "\"").getBytes(StandardCharsets.UTF_8));
    assertEquals(List.of("a"), ok.classNames);
  }

  private static float[][] rows(float[] flat, int width) {
    float[][] out = new float[flat.length / width][];
    for (int i = 0; i < out.length; i++) {
      out[i] = Arrays.copyOfRange(flat, i * width, (i + 1) * width);
    }
    return out;
  }
}
