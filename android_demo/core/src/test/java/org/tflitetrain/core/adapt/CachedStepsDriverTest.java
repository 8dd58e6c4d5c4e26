package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tflitetrain.core.model.CachedCut;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.GraphSignature;
import org.tflitetrain.core.model.ModelMetadata;
import org.tflitetrain.core.model.ModelMetadataException;
import org.tflitetrain.core.model.ModelMetadataTest;

/**
 * {@link AdaptationDriver} with the cached cut on the golden metadata plus three cuts (b02_expand,
 * b03_expand, final), through the checked runner: which signatures it calls, with which rows, and the
 * fallback to full steps with the reason; and the graph validation of the cut signatures.
 */
public class CachedStepsDriverTest {
  private static final int N = 6;
  private static final int ITERATIONS = 3;

  /**
   * The base fake plus the cache signatures: an image's activation is filled with its first pixel (the
   * image index), infer_from's embedding starts with the activation's first value (as the fake infer's
   * starts with the first pixel), train_step_from returns 1 / calls.
   */
  private static final class CacheFake implements SignatureRunner {
    final AdaptationDriverTest.FakeRunner base;

    CacheFake(ModelMetadata m) {
      base = new AdaptationDriverTest.FakeRunner(m);
    }

    @Override
    public Map<String, Tensor> run(String signature, Map<String, Tensor> in) {
      ModelMetadata m = base.m;
      Map<String, Tensor> out = new LinkedHashMap<>();
      if (signature.startsWith(Contract.FEATURES_PREFIX)) {
        int[] shape = cut(m, signature).shape();
        int[] imageShape = in.get(Contract.IMAGES).shape();
        int n = imageShape[0];
        int pixels = imageShape[1] * imageShape[2] * imageShape[3];
        int per = 1;
        for (int d : shape) {
          per *= d;
        }
        float[] images = in.get(Contract.IMAGES).floats();
        float[] activations = new float[n * per];
        for (int i = 0; i < n; i++) {
          Arrays.fill(activations, i * per, (i + 1) * per, images[i * pixels]);
        }
        int[] batched = new int[shape.length + 1];
        batched[0] = n;
        System.arraycopy(shape, 0, batched, 1, shape.length);
        out.put(Contract.ACTIVATIONS, Tensor.ofFloats(batched, activations));
      } else if (signature.startsWith(Contract.TRAIN_FROM_PREFIX)) {
        base.calls.add(signature);
        out.put(Contract.LOSS, Tensor.scalar(1.0f / base.calls.size()));
        out.put(Contract.ACCURACY, Tensor.scalar(0.5f));
      } else if (signature.startsWith(Contract.INFER_FROM_PREFIX)) {
        int[] shape = in.get(Contract.ACTIVATIONS).shape();
        int n = shape[0];
        int per = in.get(Contract.ACTIVATIONS).size() / n;
        float[] activations = in.get(Contract.ACTIVATIONS).floats();
        float[] emb = new float[n * m.featureDim];
        for (int i = 0; i < n; i++) {
          emb[i * m.featureDim] = activations[i * per];
        }
        out.put(Contract.EMBEDDINGS, Tensor.ofFloats(new int[] {n, m.featureDim}, emb));
        out.put(Contract.LOGITS, Tensor.ofFloats(new int[] {n, m.classCapacity}, new float[n * m.classCapacity]));
      } else {
        return base.run(signature, in);
      }
      return out;
    }

    private static CachedCut cut(ModelMetadata m, String signature) {
      for (CachedCut cut : m.cachedCuts) {
        if (cut.featuresSignature.equals(signature)) {
          return cut;
        }
      }
      throw new IllegalArgumentException("no cut has " + signature);
    }
  }

  /** One adaptation of N images (labels 0, 1, 2, 0, 1, 2) under a fixed selection; the checked runner it used. */
  private static final class Run {
    final ContractRunner runner;
    final AdaptationResult result;

    Run(ModelMetadata m, List<String> layers, AdaptationConfig.Builder config) throws Exception {
      runner = new ContractRunner(ContractRunner.fromMetadata(m), new CacheFake(m));
      AdaptationDriver driver = new AdaptationDriver(m, runner);
      int[] labels = new int[N];
      for (int i = 0; i < N; i++) {
        labels[i] = i % 3;
      }
      SelectionPolicy policy = new FixedSelectionPolicy("fixed", Selection.fullLayers(m, layers));
      result = driver.adapt(AdaptationDriverTest.images(m, N), labels, 3, policy,
          config.iterations(ITERATIONS).batchSize(4).evalBatchSize(4).build(), AdaptationListener.NONE, () -> false);
    }

    List<String> calls(String signature) {
      List<String> out = new ArrayList<>();
      for (String call : runner.calls) {
        if (call.equals(signature)) {
          out.add(call);
        }
      }
      return out;
    }

    /** The inputs of every call of {@code signature}, in order. */
    List<Map<String, Tensor>> inputs(String signature) {
      List<Map<String, Tensor>> out = new ArrayList<>();
      for (int i = 0; i < runner.calls.size(); i++) {
        if (runner.calls.get(i).equals(signature)) {
          out.add(runner.inputs.get(i));
        }
      }
      return out;
    }
  }

  private static ModelMetadata withCuts() throws Exception {
    return ModelMetadata.parse(ModelMetadataTest.goldenWithCuts());
  }

  @Test
  public void stepsRunFromTheHighestCutBelowTheSelectionOnTheSameRows() throws Exception {
    ModelMetadata m = withCuts();
    List<String> layers = List.of("b03_depthwise", "b03_project", "final");  // deepest 10 -> cut b03_expand (9)
    Run cached = new Run(m, layers, new AdaptationConfig.Builder());
    Run full = new Run(m, layers, new AdaptationConfig.Builder().cache(false));

    assertTrue(cached.result.cache.reason, cached.result.cache.used);
    assertEquals("b03_expand", cached.result.cache.layer());
    assertEquals(N * 4L * 8 * 8 * 12, cached.result.cache.cacheBytes);
    assertEquals(N * 4L * 32 * 32 * 3, cached.result.cache.limitBytes);
    // features once over the support set (batches of 4 + 2), then only steps from the cut
    assertEquals(2, cached.calls(Contract.FEATURES_PREFIX + "b03_expand").size());
    assertEquals(ITERATIONS, cached.calls(Contract.TRAIN_FROM_PREFIX + "b03_expand").size());
    assertEquals(List.of(), cached.calls(Contract.TRAIN_STEP));
    // the refresh embeds the cached activations: infer only for the initial prototypes
    assertEquals(2, cached.calls(Contract.INFER_FROM_PREFIX + "b03_expand").size());
    assertEquals(2, cached.calls(Contract.INFER).size());

    assertFalse(full.result.cache.used);
    assertTrue(full.result.cache.reason, full.result.cache.reason.contains("cache off"));
    assertEquals(ITERATIONS, full.calls(Contract.TRAIN_STEP).size());
    assertEquals(4, full.calls(Contract.INFER).size());

    // Step k of both runs reads the same support rows: activation row value = image index = first pixel.
    List<Map<String, Tensor>> fromCache = cached.inputs(Contract.TRAIN_FROM_PREFIX + "b03_expand");
    List<Map<String, Tensor>> fromImages = full.inputs(Contract.TRAIN_STEP);
    for (int step = 0; step < ITERATIONS; step++) {
      Tensor activations = fromCache.get(step).get(Contract.ACTIVATIONS);
      Tensor images = fromImages.get(step).get(Contract.IMAGES);
      assertArrayEquals(new int[] {4, 8, 8, 12}, activations.shape());
      assertArrayEquals(fromImages.get(step).get(Contract.LABELS).ints(), fromCache.get(step).get(Contract.LABELS).ints());
      assertArrayEquals(firstValues(images), firstValues(activations), 0f);
    }
    // and the refreshed head is the same
    assertEquals(lastHead(full), lastHead(cached));
  }

  @Test
  public void aSelectionBelowEveryCutTakesFullSteps() throws Exception {
    // cuts at b03_expand (9) and final (12) only; b02_project (8) is selected
    ModelMetadata m = ModelMetadata.parse(ModelMetadataTest.withCachedCuts(AdaptationDriverTest.metadataText(),
        List.of(ModelMetadataTest.cutEntry("b03_expand", 9, 40_000, 8L, 8L, 12L),
            ModelMetadataTest.cutEntry("final", 12, 8_192, 4L, 4L, 16L))));
    Run run = new Run(m, List.of("b02_project", "final"), new AdaptationConfig.Builder());
    assertFalse(run.result.cache.used);
    assertTrue(run.result.cache.reason, run.result.cache.reason.contains("no cached cut lies at or below"));
    assertEquals(ITERATIONS, run.calls(Contract.TRAIN_STEP).size());
    for (String call : run.runner.calls) {
      assertFalse(call, call.startsWith(Contract.FEATURES_PREFIX));
    }
  }

  @Test
  public void aCacheOverItsLimitTakesFullSteps() throws Exception {
    ModelMetadata m = withCuts();
    Run run = new Run(m, List.of("final"), new AdaptationConfig.Builder().cacheLimitBytes(N * 4L * 4 * 4 * 16 - 1));
    assertFalse(run.result.cache.used);
    assertEquals("final", run.result.cache.layer());
    assertTrue(run.result.cache.reason, run.result.cache.reason.contains("over its limit"));
    assertEquals(ITERATIONS, run.calls(Contract.TRAIN_STEP).size());

    Run fits = new Run(m, List.of("final"), new AdaptationConfig.Builder().cacheLimitBytes(N * 4L * 4 * 4 * 16));
    assertTrue(fits.result.cache.reason, fits.result.cache.used);
    assertEquals(ITERATIONS, fits.calls(Contract.TRAIN_FROM_PREFIX + "final").size());
  }

  @Test
  public void aModelWithoutCutsTakesFullStepsAndSaysWhy() throws Exception {
    ModelMetadata m = AdaptationDriverTest.metadata();
    Run run = new Run(m, List.of("final"), new AdaptationConfig.Builder());
    assertFalse(run.result.cache.used);
    assertTrue(run.result.cache.reason, run.result.cache.reason.contains("no cached-cut signatures"));
    assertEquals(ITERATIONS, run.calls(Contract.TRAIN_STEP).size());
  }

  @Test
  public void graphValidationChecksTheCutSignatures() throws Exception {
    ModelMetadata m = withCuts();
    Map<String, GraphSignature> graph = ContractRunner.fromMetadata(m);
    m.validateGraph(graph);

    String train = Contract.TRAIN_FROM_PREFIX + "b03_expand";
    Map<String, GraphSignature> wrongShape = new LinkedHashMap<>(graph);
    Map<String, GraphSignature.TensorInfo> inputs = new LinkedHashMap<>(graph.get(train).inputs);
    inputs.put(Contract.ACTIVATIONS, new GraphSignature.TensorInfo("float32", new int[] {-1, 8, 8, 24}));
    wrongShape.put(train, new GraphSignature(train, inputs, graph.get(train).outputs));
    String message = assertThrows(ModelMetadataException.class, () -> m.validateGraph(wrongShape)).getMessage();
    assertTrue(message, message.contains("metadata cached_cuts[b03_expand].shape = [8, 8, 12] but the graph has [-1, 8, 8, 24]"));

    Map<String, GraphSignature> missing = new LinkedHashMap<>(graph);
    missing.remove(Contract.INFER_FROM_PREFIX + "final");
    message = assertThrows(ModelMetadataException.class, () -> m.validateGraph(missing)).getMessage();
    assertTrue(message, message.contains("signatures." + Contract.INFER_FROM_PREFIX + "final = present but the graph has no such"));
  }

  /** The first value of each row of a [N, ...] float tensor. */
  private static float[] firstValues(Tensor tensor) {
    int n = tensor.shape()[0];
    int per = tensor.size() / n;
    float[] data = tensor.floats();
    float[] out = new float[n];
    for (int i = 0; i < n; i++) {
      out[i] = data[i * per];
    }
    return out;
  }

  /** The prototypes of the last set_head call, as a list (for equality with a message). */
  private static List<Float> lastHead(Run run) {
    List<Map<String, Tensor>> heads = run.inputs(Contract.SET_HEAD);
    float[] values = heads.get(heads.size() - 1).get(Contract.PROTOTYPES).floats();
    List<Float> out = new ArrayList<>();
    for (float v : values) {
      out.add(v);
    }
    return Collections.unmodifiableList(out);
  }
}
