package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.Assume;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tflitetrain.core.model.GraphSignature;
import org.tflitetrain.core.model.ModelMetadata;
import org.tflitetrain.core.model.TfliteMetadataReader;

/**
 * Continued adaptation across the two runtimes (issue 42) on the real tiny fixture and Fashion-MNIST images,
 * through the checked runner and the Python bridge: Java adapts 3 classes and writes a checkpoint with a replay
 * memory; Python continues from it with a 4th class ({@code adapt --from}'s library path) and writes one; Java reads
 * that, continues with new images of a known class (the replay memory trained on, only layers at or above its cut)
 * and writes one, which Python restores with Java's predictions.
 */
public class RealModelContinualTest {
  private static final int ITERATIONS = 4;
  private static final long BUDGET = 1 << 20;

  @Rule
  public TemporaryFolder tmp = new TemporaryFolder();

  @Test
  public void javaAndPythonContinueEachOthersCheckpoints() throws Exception {
    String dir = System.getProperty("tflitetrain.fixtures");
    Assume.assumeTrue("system property tflitetrain.fixtures not set", dir != null);
    Path path = Paths.get(dir, "tiny_adam_33.tflite");
    ByteBuffer file = ByteBuffer.wrap(Files.readAllBytes(path));
    ModelMetadata m = ModelMetadata.load(file);
    Map<String, GraphSignature> graph = TfliteMetadataReader.signatures(file);
    try (BridgeRunner bridge = new BridgeRunner(path)) {
      ContractRunner runner = new ContractRunner(graph, bridge);
      Map<String, Object> episode = bridge.call("{\"op\": \"episode\", \"ways\": 4, \"shots\": 3, \"queries\": 3, \"seed\": 1}");
      Tensor support = BridgeRunner.tensorOf(episode.get("support"));
      int[] labels = BridgeRunner.tensorOf(episode.get("support_labels")).ints();
      Tensor query = BridgeRunner.tensorOf(episode.get("query"));
      int[] old = rows(labels, 0, 1, 2);
      int[] added = rows(labels, 3);
      AdaptationConfig config = new AdaptationConfig.Builder().iterations(ITERATIONS).batchSize(4).evalBatchSize(4).build();

      // 1. Java: 3 classes, a checkpoint with a replay memory of all 9 images
      AdaptationDriver driver = new AdaptationDriver(m, runner);
      AdaptationResult first = driver.adapt(AdaptationDriver.gather(support, old), pick(labels, old), 3, ConfiguredPolicy.tinyTrain(),
          config, AdaptationListener.NONE, () -> false);
      List<String> names = List.of("a", "b", "c");
      Path one = tmp.getRoot().toPath().resolve("one.ckpt");
      Checkpoint.writeAtomic(one, driver.checkpointAfter(null, first, AdaptationDriver.gather(support, old), pick(labels, old), names,
          BUDGET, 0, false));
      Checkpoint javaOne = Checkpoint.decode(Files.readAllBytes(one), "one");
      assertNotNull(javaOne.replay);
      assertArrayEquals(new int[] {3, 3, 3}, javaOne.replay.classCounts(3));

      // 2. Python continues from Java's checkpoint with a new class "d"
      Path two = tmp.getRoot().toPath().resolve("two.ckpt");
      Map<String, Object> continued = bridge.call("{\"op\": \"continue\", \"checkpoint\": " + BridgeRunner.quote(one.toString())
          + ", \"save\": " + BridgeRunner.quote(two.toString()) + ", \"images\": " + BridgeRunner.tensor(AdaptationDriver.gather(support, added))
          + ", \"labels\": " + BridgeRunner.tensor(Tensor.ofInts(new int[] {added.length}, new int[added.length]))
          + ", \"names\": [\"d\"], \"queries\": " + BridgeRunner.tensor(query) + ", \"iterations\": " + ITERATIONS
          + ", \"batch_size\": 4, \"replay_budget\": " + BUDGET + "}");
      assertEquals(List.of("a", "b", "c", "d"), continued.get("class_names"));
      assertEquals(9L, ((Number) continued.get("replayed")).longValue());

      // 3. Java reads Python's checkpoint and continues with 2 new images of the known class "b"
      Checkpoint pythonTwo = Checkpoint.decode(Files.readAllBytes(two), "two");
      assertEquals(List.of("a", "b", "c", "d"), pythonTwo.classNames);
      assertArrayEquals(new int[] {3, 3, 3, 3}, pythonTwo.replay.classCounts(4));
      // Python stored the views its run trained on (4 per new image; Java's images have their plain views only)
      assertArrayEquals(new int[] {0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4}, pythonTwo.replay.furtherViews());
      assertEquals(javaOne.replay.cutLayer, pythonTwo.replay.cutLayer);
      Continuation start = Continuation.of(pythonTwo, List.of("b"), true);
      int[] more = Arrays.copyOf(rows(BridgeRunner.tensorOf(episode.get("query_labels")).ints(), 1), 2);
      Tensor moreImages = AdaptationDriver.gather(query, more);
      int[] moreLabels = start.headLabels(new int[more.length]);
      assertArrayEquals(new int[] {1, 1}, moreLabels);
      AdaptationDriver next = new AdaptationDriver(m, runner);
      AdaptationResult third = next.adaptFrom(start, moreImages, moreLabels, ConfiguredPolicy.tinyTrain(), config,
          AdaptationListener.NONE, () -> false);
      assertEquals(4, next.numClasses());
      assertTrue(third.cache.reason, third.cache.used);
      assertEquals(pythonTwo.replay.cutLayer, third.cache.layer());
      for (String layer : third.selection.channels().keySet()) {
        assertTrue(layer, m.table.indexOf(layer) >= pythonTwo.replay.cutIndex);
      }
      assertFalse(third.losses.isEmpty());
      Path three = tmp.getRoot().toPath().resolve("three.ckpt");
      Checkpoint.writeAtomic(three, next.checkpointAfter(start, third, moreImages, moreLabels, start.classNames, BUDGET,
          0, false));
      Checkpoint javaThree = Checkpoint.decode(Files.readAllBytes(three), "three");
      assertEquals(List.of("a", "b", "c", "d"), javaThree.classNames);
      assertArrayEquals(new int[] {3, 5, 3, 3}, javaThree.replay.classCounts(4));
      // Java carries Python's stored views on (its own new images add plain views only)
      assertArrayEquals(new int[] {0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 0, 0}, javaThree.replay.furtherViews());
      for (Map.Entry<String, int[]> entry : pythonTwo.selection.entrySet()) {  // the stored selection is a union
        for (int c : entry.getValue()) {
          assertTrue(entry.getKey() + " " + c, Arrays.stream(javaThree.selection.get(entry.getKey())).anyMatch(v -> v == c));
        }
      }

      // 4. Python restores Java's continued checkpoint: the same predictions
      int[] predictions = argmax(next.classify(query, 8));
      Map<String, Object> restored = bridge.call("{\"op\": \"restore_predict\", \"checkpoint\": "
          + BridgeRunner.quote(three.toString()) + ", \"queries\": " + BridgeRunner.tensor(query) + "}");
      assertArrayEquals(predictions, BridgeRunner.tensorOf(restored.get("predictions")).ints());
    }
  }

  private static int[] rows(int[] labels, int... classes) {
    return java.util.stream.IntStream.range(0, labels.length)
        .filter(i -> Arrays.stream(classes).anyMatch(c -> c == labels[i])).toArray();
  }

  private static int[] pick(int[] values, int[] rows) {
    return Arrays.stream(rows).map(i -> values[i]).toArray();
  }

  private static int[] argmax(float[][] logits) {
    int[] out = new int[logits.length];
    for (int i = 0; i < logits.length; i++) {
      out[i] = AdaptationDriver.argmax(logits[i]);
    }
    return out;
  }
}
