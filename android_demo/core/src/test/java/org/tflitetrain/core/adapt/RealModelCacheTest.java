package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Assume;
import org.junit.Test;
import org.tflitetrain.core.JsonText;
import org.tflitetrain.core.json.Json;
import org.tflitetrain.core.model.CachedCut;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.GraphSignature;
import org.tflitetrain.core.model.ModelMetadata;
import org.tflitetrain.core.model.TfliteMetadataReader;

/**
 * The cached cut on a real exported model (the tiny fixture, real Fashion-MNIST images) through
 * the checked runner and the Python bridge: the same support set adapted with the cache on, off, and with
 * metadata that lacks {@code cached_cuts} (a file exported before the cache: the driver's fallback) gives
 * the same per-step losses and the same state (every {@code get_state} tensor within {@value #TOLERANCE});
 * only the cached run calls the cut's signatures.
 */
public class RealModelCacheTest {
  private static final String FIXTURE = "tiny_adam_33";
  private static final int ITERATIONS = 6;
  private static final double TOLERANCE = 1e-5;

  private static Path fixture() {
    String dir = System.getProperty("tflitetrain.fixtures");
    Assume.assumeTrue("system property tflitetrain.fixtures not set", dir != null);
    return Paths.get(dir, FIXTURE + ".tflite");
  }

  /** An adaptation's result, the adapted state and the signatures it called. */
  private static final class Run {
    final AdaptationResult result;
    final Map<String, Tensor> state;
    final List<String> calls;

    Run(AdaptationResult result, Map<String, Tensor> state, List<String> calls) {
      this.result = result;
      this.state = state;
      this.calls = calls;
    }
  }

  private static Run adapt(ModelMetadata m, Map<String, GraphSignature> graph, BridgeRunner bridge, Tensor support,
      int[] labels, SelectionPolicy policy, boolean cache) throws Exception {
    ContractRunner runner = new ContractRunner(graph, bridge);
    AdaptationDriver driver = new AdaptationDriver(m, runner);
    // batch 4 of 9 images: the shuffled mini-batches are gathered from the cache like from the images
    AdaptationConfig config = new AdaptationConfig.Builder().iterations(ITERATIONS).batchSize(4).evalBatchSize(4)
        .learningRate(0.01f).cache(cache).build();
    AdaptationResult result = driver.adapt(support, labels, 3, policy, config, AdaptationListener.NONE, () -> false);
    return new Run(result, driver.getState(), List.copyOf(runner.calls));
  }

  /**
   * Half the channels of every candidate from the lowest cut's layer up: the deepest selected layer is that
   * cut's, so a cached run must use it.
   */
  private static SelectionPolicy fromLowestCut(ModelMetadata m) {
    CachedCut lowest = m.cachedCuts.get(0);
    Map<String, int[]> channels = new LinkedHashMap<>();
    for (String layer : m.candidates) {
      if (m.table.indexOf(layer) >= lowest.index) {
        int[] half = new int[Math.max(1, m.candidate(layer).outChannels / 2)];
        for (int c = 0; c < half.length; c++) {
          half[c] = 2 * c;
        }
        channels.put(layer, half);
      }
    }
    return new FixedSelectionPolicy("from-" + lowest.layer, new Selection(m, channels));
  }

  /** The fixture's metadata without {@code cached_cuts}, as a file exported before the cache has it. */
  private static ModelMetadata withoutCachedCuts(ByteBuffer file) throws Exception {
    String json = new String(TfliteMetadataReader.read(file, ModelMetadata.METADATA_NAME), StandardCharsets.UTF_8);
    Map<String, Object> root = JsonText.mutable(Json.parse(json));
    assertTrue(root.remove(Contract.F_CACHED_CUTS) != null);
    return ModelMetadata.parse(JsonText.write(root));
  }

  private static void assertSameRun(String what, Run expected, Run actual) {
    assertEquals(what, ITERATIONS, actual.result.losses.size());
    for (int i = 0; i < ITERATIONS; i++) {
      assertEquals(what + ": loss of step " + (i + 1), expected.result.losses.get(i), actual.result.losses.get(i), TOLERANCE);
    }
    assertEquals(what, expected.state.keySet(), actual.state.keySet());
    for (Map.Entry<String, Tensor> entry : expected.state.entrySet()) {
      Tensor want = entry.getValue();
      Tensor got = actual.state.get(entry.getKey());
      String where = what + ": state " + entry.getKey();
      assertEquals(where, want.dtype, got.dtype);
      assertEquals(where, Arrays.toString(want.shape()), Arrays.toString(got.shape()));
      if (want.dtype == Tensor.DType.FLOAT32) {
        float[] a = want.floats();
        float[] b = got.floats();
        for (int i = 0; i < a.length; i++) {
          assertEquals(where + "[" + i + "]", a[i], b[i], TOLERANCE);
        }
      } else {
        assertEquals(where, want, got);
      }
    }
  }

  private static int count(List<String> calls, String signature) {
    return (int) calls.stream().filter(signature::equals).count();
  }

  @Test
  public void cachedStepsEqualFullStepsOnARealModel() throws Exception {
    Path path = fixture();
    ByteBuffer file = ByteBuffer.wrap(Files.readAllBytes(path));
    ModelMetadata m = ModelMetadata.load(file);
    assertFalse(FIXTURE + " has no cached_cuts: re-export the fixtures", m.cachedCuts.isEmpty());
    Map<String, GraphSignature> graph = TfliteMetadataReader.signatures(file);
    ModelMetadata older = withoutCachedCuts(file);
    older.validateGraph(graph);
    assertTrue(older.cachedCuts.isEmpty());
    try (BridgeRunner bridge = new BridgeRunner(path)) {
      Map<String, Object> episode = bridge.call("{\"op\": \"episode\", \"ways\": 3, \"shots\": 3, \"queries\": 1, \"seed\": 1}");
      Tensor support = BridgeRunner.tensorOf(episode.get("support"));
      int[] labels = BridgeRunner.tensorOf(episode.get("support_labels")).ints();
      SelectionPolicy policy = fromLowestCut(m);
      CachedCut cut = m.cachedCuts.get(0);

      Run cached = adapt(m, graph, bridge, support, labels, policy, true);
      Run full = adapt(m, graph, bridge, support, labels, policy, false);
      Run fallback = adapt(older, graph, bridge, support, labels, policy, true);

      assertTrue(cached.result.cache.reason, cached.result.cache.used);
      assertEquals(cut.layer, cached.result.cache.layer());
      assertEquals(labels.length * cut.bytesPerImage(), cached.result.cache.cacheBytes);
      assertEquals(cut.suffixForwardMacs, cached.result.cache.stepForwardMacs);
      assertEquals(ITERATIONS, count(cached.calls, cut.trainSignature));
      assertEquals((labels.length + 3) / 4, count(cached.calls, cut.featuresSignature));
      assertEquals(0, count(cached.calls, Contract.TRAIN_STEP));

      assertFalse(full.result.cache.used);
      assertTrue(full.result.cache.reason, full.result.cache.reason.contains("cache off"));
      assertEquals(ITERATIONS, count(full.calls, Contract.TRAIN_STEP));
      assertEquals(0, count(full.calls, cut.featuresSignature) + count(full.calls, cut.trainSignature));

      assertFalse(fallback.result.cache.used);
      assertTrue(fallback.result.cache.reason, fallback.result.cache.reason.contains("no cached-cut signatures"));
      assertEquals(ITERATIONS, count(fallback.calls, Contract.TRAIN_STEP));
      assertEquals(0, count(fallback.calls, cut.featuresSignature) + count(fallback.calls, cut.trainSignature));

      assertSameRun("cache off", cached, full);
      assertSameRun("no cached_cuts", cached, fallback);
    }
  }
}
