package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.Assume;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.junit.runner.RunWith;
import org.junit.runners.Parameterized;
import org.tflitetrain.core.model.GraphSignature;
import org.tflitetrain.core.model.ModelMetadata;
import org.tflitetrain.core.model.TfliteMetadataReader;

/**
 * {@link AdaptationDriver} adapts a real exported model (the tiny backbone fixture, real Fashion-MNIST
 * images) through the checked runner and the Python bridge; its selection, per-step losses (within 1e-4),
 * query predictions and cached cut decision (used, cut layer) equal those of the Python
 * {@code Trainer} ({@code tflite_train.runtime.adaptation.trainer.adapt}) on the same inputs; a checkpoint written by Java restores in Python with identical predictions and the
 * reverse; and its state survives a {@link StateFile} round trip.
 *
 * <p>Also on the int8 exports of the same shape (issue 27, {@code docs/int8.md}): {@code tiny_int8c_33}
 * ({@code --quantize int8-candidates}: candidate kernels stored int8, dequantized into float state) and
 * {@code tiny_int8_33} ({@code --quantize int8}: the frozen prefix runs int8 kernels too). The Java core
 * treats them like any export: the contract, the state and the checkpoints are float32.
 */
@RunWith(Parameterized.class)
public class RealModelAdaptationTest {
  private static final int ITERATIONS = 5;

  @Parameterized.Parameters(name = "{0}")
  public static Collection<Object[]> fixtures() {
    return List.of(new Object[] {"tiny_adam_33"}, new Object[] {"tiny_int8c_33"}, new Object[] {"tiny_int8_33"});
  }

  private final String fixtureName;

  public RealModelAdaptationTest(String fixtureName) {
    this.fixtureName = fixtureName;
  }

  @Rule
  public TemporaryFolder tmp = new TemporaryFolder();

  private Path fixture() {
    String dir = System.getProperty("tflitetrain.fixtures");
    Assume.assumeTrue("system property tflitetrain.fixtures not set", dir != null);
    return Paths.get(dir, fixtureName + ".tflite");
  }

  @Test
  public void adaptsARealModelLikeThePythonTrainer() throws Exception {
    Path path = fixture();
    ByteBuffer file = ByteBuffer.wrap(Files.readAllBytes(path));
    ModelMetadata m = ModelMetadata.load(file);
    Map<String, GraphSignature> graph = TfliteMetadataReader.signatures(file);
    try (BridgeRunner bridge = new BridgeRunner(path)) {
      ContractRunner runner = new ContractRunner(graph, bridge);
      Map<String, Object> episode = bridge.call("{\"op\": \"episode\", \"ways\": 3, \"shots\": 3, \"queries\": 4, \"seed\": 0}");
      Tensor support = BridgeRunner.tensorOf(episode.get("support"));
      Tensor supportLabels = BridgeRunner.tensorOf(episode.get("support_labels"));
      Tensor query = BridgeRunner.tensorOf(episode.get("query"));
      int[] labels = supportLabels.ints();

      AdaptationDriver driver = new AdaptationDriver(m, runner);
      AdaptationConfig config = new AdaptationConfig.Builder().iterations(ITERATIONS).batchSize(0).evalBatchSize(4).build();
      AdaptationResult result = driver.adapt(support, labels, 3, ConfiguredPolicy.tinyTrain(), config,
          AdaptationListener.NONE, () -> false);
      int[] predictions = argmax(driver.classify(query, 8));

      Path pythonCheckpoint = tmp.getRoot().toPath().resolve("python.ckpt");
      Map<String, Object> reference = bridge.call("{\"op\": \"trainer\", \"save\": "
          + BridgeRunner.quote(pythonCheckpoint.toString()) + ", \"images\": " + BridgeRunner.tensor(support)
          + ", \"labels\": " + BridgeRunner.tensor(supportLabels) + ", \"queries\": " + BridgeRunner.tensor(query)
          + ", \"iterations\": " + ITERATIONS + ", \"batch_size\": " + labels.length + "}");

      Map<String, List<Integer>> javaSelection = new TreeMap<>();
      for (Map.Entry<String, int[]> entry : result.selection.channels().entrySet()) {
        int[] sorted = entry.getValue().clone();
        Arrays.sort(sorted);
        javaSelection.put(entry.getKey(), Arrays.stream(sorted).boxed().toList());
      }
      Map<String, List<Integer>> pythonSelection = new TreeMap<>();
      for (Map.Entry<?, ?> entry : ((Map<?, ?>) reference.get("selection")).entrySet()) {
        pythonSelection.put((String) entry.getKey(), ((List<?>) entry.getValue()).stream()
            .map(v -> ((Number) v).intValue()).sorted().toList());
      }
      assertFalse(javaSelection.isEmpty());
      assertEquals(pythonSelection, javaSelection);

      List<?> pythonLosses = (List<?>) reference.get("losses");
      assertEquals(ITERATIONS, result.losses.size());
      assertEquals(pythonLosses.size(), result.losses.size());
      for (int i = 0; i < ITERATIONS; i++) {
        assertEquals("loss of step " + (i + 1), ((Number) pythonLosses.get(i)).doubleValue(), result.losses.get(i), 1e-4);
      }
      assertArrayEquals(BridgeRunner.tensorOf(reference.get("predictions")).ints(), predictions);
      // Both runtimes pick the same cut and train from it (Python's views are identity copies of the support
      // set, so its cache and limit both scale by the view count: the same fit decision).
      Map<?, ?> pythonCache = (Map<?, ?>) reference.get("cache");
      assertTrue(result.cache.reason, result.cache.used);
      assertEquals(pythonCache.get("used"), result.cache.used);
      assertEquals(pythonCache.get("layer"), result.cache.layer());

      // One checkpoint format: Java's file restores in Python with the same predictions, and the reverse.
      for (boolean optimizer : new boolean[] {false, true}) {
        Path javaCheckpoint = tmp.getRoot().toPath().resolve("java-" + optimizer + ".ckpt");
        driver.saveCheckpoint(javaCheckpoint, result.selection, result.policy, optimizer);
        Map<String, Object> restored = bridge.call("{\"op\": \"restore_predict\", \"checkpoint\": "
            + BridgeRunner.quote(javaCheckpoint.toString()) + ", \"queries\": " + BridgeRunner.tensor(query) + "}");
        assertArrayEquals(predictions, BridgeRunner.tensorOf(restored.get("predictions")).ints());
      }
      AdaptationDriver fresh = new AdaptationDriver(m, runner);
      fresh.restoreCheckpoint(Files.readAllBytes(pythonCheckpoint), pythonCheckpoint.toString());
      assertEquals(3, fresh.numClasses());
      assertArrayEquals(BridgeRunner.tensorOf(reference.get("predictions")).ints(), argmax(fresh.classify(query, 8)));

      // The adapted state survives a StateFile round trip: reset, restore, same predictions.
      Map<String, Tensor> state = driver.getState();
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      StateFile.write(bytes, m.modelId, state);
      driver.resetState();
      driver.setState(StateFile.read(new ByteArrayInputStream(bytes.toByteArray()), m.modelId));
      assertArrayEquals(predictions, argmax(driver.classify(query, 8)));
    }
  }

  private static int[] argmax(float[][] logits) {
    int[] out = new int[logits.length];
    for (int i = 0; i < logits.length; i++) {
      out[i] = AdaptationDriver.argmax(logits[i]);
    }
    return out;
  }
}
