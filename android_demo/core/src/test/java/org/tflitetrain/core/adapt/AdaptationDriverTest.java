package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import org.junit.Test;
import org.tflitetrain.core.Resources;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.model.ModelMetadata;
import org.tflitetrain.core.select.Budget;
import org.tflitetrain.core.select.BudgetException;
import org.tflitetrain.core.select.Criterion;
import org.tflitetrain.core.select.OnEmpty;
import org.tflitetrain.core.select.PolicyKind;

public class AdaptationDriverTest {
  /**
   * Records every call; infer returns embeddings = (first pixel value, label-free constant) per image.
   * Always wrapped in a {@link ContractRunner} ({@link #checked}), so every call the driver makes passes
   * the real TFLite Java API's preconditions.
   */
  static final class FakeRunner implements SignatureRunner {
    final ModelMetadata m;
    final List<String> calls = new ArrayList<>();
    final List<Map<String, Tensor>> inputs = new ArrayList<>();

    FakeRunner(ModelMetadata m) {
      this.m = m;
    }

    @Override
    public Map<String, Tensor> run(String signature, Map<String, Tensor> in) {
      calls.add(signature);
      inputs.add(in);
      Map<String, Tensor> out = new LinkedHashMap<>();
      switch (signature) {
        case "infer": {
          int[] shape = in.get("images").shape();
          int n = shape[0];
          int per = shape[1] * shape[2] * shape[3];
          float[] images = in.get("images").floats();
          float[] emb = new float[n * m.featureDim];
          float[] logits = new float[n * m.classCapacity];
          for (int i = 0; i < n; i++) {
            emb[i * m.featureDim] = images[i * per];
            logits[i * m.classCapacity + 1] = images[i * per];
          }
          out.put("embeddings", Tensor.ofFloats(new int[] {n, m.featureDim}, emb));
          out.put("logits", Tensor.ofFloats(new int[] {n, m.classCapacity}, logits));
          break;
        }
        case "fisher": {
          int n = in.get("labels").size();
          for (String name : m.candidates) {
            float[] s = new float[m.candidate(name).outChannels];
            s[0] = n; // the batch size, to check the sample-weighted combination
            out.put(name, Tensor.ofFloats(new int[] {s.length}, s));
          }
          break;
        }
        case "train_step":
          out.put("loss", Tensor.scalar(1.0f / calls.size()));
          out.put("accuracy", Tensor.scalar(0.5f));
          break;
        case "get_state": {
          float value = 0;
          for (Object name : (List<?>) m.raw.get("state")) {
            out.put((String) name, name.equals("num_classes") ? Tensor.scalar(3)
                : Tensor.ofFloats(new int[] {2}, new float[] {value++, -value}));
          }
          break;
        }
        default:
          out.put("ok", Tensor.scalar(1));
      }
      return out;
    }
  }

  /** {@code fake} behind the contract's preconditions for the golden metadata. */
  static ContractRunner checked(FakeRunner fake) {
    return new ContractRunner(ContractRunner.fromMetadata(fake.m), fake);
  }

  static String metadataText() {
    return Resources.text("/golden/metadata_tiny_32.json");
  }

  static ModelMetadata metadata() throws Exception {
    return ModelMetadata.parse(metadataText());
  }

  /** n images whose every pixel equals the image index. */
  static Tensor images(ModelMetadata m, int n) {
    int per = m.input.elementsPerImage();
    float[] data = new float[n * per];
    for (int i = 0; i < n; i++) {
      java.util.Arrays.fill(data, i * per, (i + 1) * per, i);
    }
    return Tensor.ofFloats(new int[] {n, m.input.height, m.input.width, m.input.channels}, data);
  }

  @Test
  public void callsSignaturesInOrderWithTheMask() throws Exception {
    ModelMetadata m = metadata();
    FakeRunner runner = new FakeRunner(m);
    AdaptationDriver driver = new AdaptationDriver(m, checked(runner));
    String layer = m.candidates.get(1);
    Selection chosen = new Selection(m, Map.of(layer, new int[] {3, 0}));
    List<AdaptationListener.Stage> stages = new ArrayList<>();
    List<Integer> steps = new ArrayList<>();
    AdaptationListener listener = new AdaptationListener() {
      @Override
      public void onStage(Stage stage) {
        stages.add(stage);
      }

      @Override
      public void onStep(int step, int total, float loss, float accuracy) {
        steps.add(step);
      }
    };
    AdaptationConfig config = new AdaptationConfig.Builder().iterations(3).batchSize(4).evalBatchSize(4)
        .learningRate(0.01f).budget(Budget.of(1_000_000, 1_000_000_000)).build();
    int[] labels = {0, 1, 2, 0, 1, 2};
    AdaptationResult result = driver.adapt(images(m, 6), labels, 3, new FixedSelectionPolicy("fixed", chosen),
        config, listener, () -> false);

    assertEquals(List.of("reset_state", "infer", "infer", "set_head", "fisher", "fisher", "set_selection",
        "set_hparams", "train_step", "train_step", "train_step", "infer", "infer", "set_head"), runner.calls);
    assertEquals(List.of(AdaptationListener.Stage.RESET, AdaptationListener.Stage.PROTOTYPES,
        AdaptationListener.Stage.FISHER, AdaptationListener.Stage.SELECTION, AdaptationListener.Stage.TRAINING,
        AdaptationListener.Stage.REFRESH, AdaptationListener.Stage.DONE), stages);
    assertEquals(List.of(1, 2, 3), steps);

    float[] mask = runner.inputs.get(6).get("channel_mask").floats();
    assertEquals(m.maskLength(), mask.length);
    float[] expected = new float[m.maskLength()];
    expected[m.maskOffset(layer)] = 1;
    expected[m.maskOffset(layer) + 3] = 1;
    assertArrayEquals(expected, mask, 0);
    assertEquals(0.01f, runner.inputs.get(7).get("learning_rate").floatValue(), 0);

    // Prototypes: class c holds images c and c+3, embedding[0] = image index -> mean c + 1.5.
    Tensor protos = runner.inputs.get(3).get("prototypes");
    assertArrayEquals(new int[] {m.classCapacity, m.featureDim}, protos.shape());
    float[] p = protos.floats();
    for (int c = 0; c < m.classCapacity; c++) {
      assertEquals(c < 3 ? c + 1.5f : 0f, p[c * m.featureDim], 0);
    }
    assertEquals(3, runner.inputs.get(3).get("num_classes").ints()[0]);

    // Train batches of 4 labels drawn from a shuffled epoch.
    for (int i = 8; i <= 10; i++) {
      assertEquals(4, runner.inputs.get(i).get("labels").size());
      assertEquals(4, runner.inputs.get(i).get("images").shape()[0]);
    }
    assertEquals(3, result.losses.size());
    assertEquals(CostModel.backwardCostByName(m.table, Map.of(layer, 2), m.optimizer.optimizer, 4, true).totalBytes(),
        result.cost.totalBytes());
    assertEquals((double) result.cost.totalBytes() / 1_000_000, result.memoryUse(), 1e-12);
    assertEquals(4, result.batchSize);
  }

  @Test
  public void fisherCombinesBatchesBySampleWeight() throws Exception {
    ModelMetadata m = metadata();
    AdaptationDriver driver = new AdaptationDriver(m, checked(new FakeRunner(m)));
    // Batches of 4 and 2 return 4 and 2: weighted mean = (4*4 + 2*2) / 6.
    FisherScores scores = driver.fisher(images(m, 6), new int[6], 4, () -> false);
    assertEquals(20f / 6, scores.layer(m.candidates.get(0))[0], 1e-6);
  }

  @Test
  public void classifiesWithActiveClassesOnly() throws Exception {
    ModelMetadata m = metadata();
    FakeRunner runner = new FakeRunner(m);
    AdaptationDriver driver = new AdaptationDriver(m, checked(runner));
    assertThrows(IllegalStateException.class, () -> driver.classify(images(m, 1), 4));
    driver.adapt(images(m, 4), new int[] {0, 1, 0, 1}, 2, ConfiguredPolicy.baseline(PolicyKind.FULL_TRAIN),
        new AdaptationConfig.Builder().iterations(1).build(), AdaptationListener.NONE, () -> false);
    float[][] logits = driver.classify(images(m, 3), 2);
    assertEquals(3, logits.length);
    assertEquals(2, logits[0].length);
    assertEquals(0, AdaptationDriver.argmax(logits[0]));
    assertEquals(1, AdaptationDriver.argmax(logits[2]));
  }

  @Test
  public void allCandidatesMaskIsAllOnes() throws Exception {
    ModelMetadata m = metadata();
    FakeRunner runner = new FakeRunner(m);
    new AdaptationDriver(m, checked(runner)).adapt(images(m, 2), new int[] {0, 1}, 2, ConfiguredPolicy.baseline(PolicyKind.FULL_TRAIN),
        new AdaptationConfig.Builder().iterations(0).resetFirst(false).refreshPrototypes(false).build(),
        AdaptationListener.NONE, () -> false);
    // the protocol's learning rate (Contract.PROTOCOL_LEARNING_RATE, not NaN) is written by set_hparams
    assertEquals(List.of("infer", "set_head", "fisher", "set_selection", "set_hparams"), runner.calls);
    for (float v : runner.inputs.get(3).get("channel_mask").floats()) {
      assertEquals(1f, v, 0);
    }
  }

  @Test
  public void cancellationStopsBeforeTheNextCall() throws Exception {
    ModelMetadata m = metadata();
    FakeRunner runner = new FakeRunner(m);
    AdaptationDriver driver = new AdaptationDriver(m, checked(runner));
    assertThrows(CancellationException.class, () -> driver.adapt(images(m, 2), new int[] {0, 1}, 2,
        ConfiguredPolicy.baseline(PolicyKind.FULL_TRAIN), new AdaptationConfig.Builder().iterations(50).build(), AdaptationListener.NONE,
        () -> runner.calls.contains("train_step")));
    assertEquals(1, runner.calls.stream().filter("train_step"::equals).count());
  }

  @Test
  public void rejectsBadSupportSets() throws Exception {
    ModelMetadata m = metadata();
    AdaptationDriver driver = new AdaptationDriver(m, checked(new FakeRunner(m)));
    AdaptationConfig config = new AdaptationConfig.Builder().build();
    SelectionPolicy policy = ConfiguredPolicy.baseline(PolicyKind.FULL_TRAIN);
    assertThrows(IllegalArgumentException.class, () -> driver.adapt(images(m, 2), new int[] {0, 0}, 2, policy,
        config, AdaptationListener.NONE, () -> false));
    assertThrows(IllegalArgumentException.class, () -> driver.adapt(images(m, 2), new int[] {0, 1, 1}, 2, policy,
        config, AdaptationListener.NONE, () -> false));
    assertThrows(IllegalArgumentException.class, () -> driver.adapt(images(m, 2), new int[] {0, 1}, 11, policy,
        config, AdaptationListener.NONE, () -> false));
    Tensor wrong = Tensor.ofFloats(new int[] {1, 2, 2, 3}, new float[12]);
    assertThrows(IllegalArgumentException.class, () -> driver.adapt(wrong, new int[] {0}, 2, policy, config,
        AdaptationListener.NONE, () -> false));
    assertThrows(IllegalArgumentException.class, () -> new Selection(m, Map.of("stem", new int[] {0})));
    assertThrows(IllegalArgumentException.class, () -> new Selection(m, Map.of(m.candidates.get(0), new int[] {0, 0})));
  }

  @Test
  public void stateRoundTripsThroughAFile() throws Exception {
    ModelMetadata m = metadata();
    FakeRunner runner = new FakeRunner(m);
    AdaptationDriver driver = new AdaptationDriver(m, checked(runner));
    Map<String, Tensor> state = driver.getState();
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    StateFile.write(bytes, m.modelId, state);
    Map<String, Tensor> back = StateFile.read(new ByteArrayInputStream(bytes.toByteArray()), m.modelId);
    assertEquals(state, back);
    assertEquals(new ArrayList<>(state.keySet()), new ArrayList<>(back.keySet()));
    driver.setState(back);
    assertEquals("set_state", runner.calls.get(runner.calls.size() - 1));
    assertEquals(back, runner.inputs.get(runner.inputs.size() - 1));
    assertEquals(3, driver.numClasses());
    IOException err = assertThrows(IOException.class,
        () -> StateFile.read(new ByteArrayInputStream(bytes.toByteArray()), "another"));
    assertTrue(err.getMessage().contains("another"));
    byte[] truncated = java.util.Arrays.copyOf(bytes.toByteArray(), bytes.size() - 3);
    assertThrows(IOException.class, () -> StateFile.read(new ByteArrayInputStream(truncated), m.modelId));
  }

  @Test
  public void tinyTrainPolicyPicksTopFisherChannelsOfEveryLayerUnderAnUnlimitedBudget() throws Exception {
    ModelMetadata m = metadata();
    FakeRunner runner = new FakeRunner(m);
    AdaptationResult result = new AdaptationDriver(m, checked(runner)).adapt(images(m, 4), new int[] {0, 1, 0, 1}, 2,
        ConfiguredPolicy.tinyTrain(), new AdaptationConfig.Builder().iterations(2).budget(Budget.unlimited()).build(),
        AdaptationListener.NONE,
        () -> false);
    // Unlimited budget: greedy keeps every candidate; the fake Fisher is non-zero only in channel 0, so the
    // top-K (ties -> lower index first) are channels 0..K-1 with K = ceil(C_out / 4).
    assertEquals("tinytrain", result.policy);
    assertEquals(m.candidates, List.copyOf(result.selection.channels().keySet()));
    for (Map.Entry<String, int[]> entry : result.selection.channels().entrySet()) {
      int k = CostModel.channelCount(m.candidate(entry.getKey()).outChannels, 0.25);
      int[] expected = new int[k];
      for (int i = 0; i < k; i++) {
        expected[i] = i;
      }
      assertArrayEquals(entry.getKey(), expected, entry.getValue());
    }
    int set = runner.calls.indexOf("set_selection");
    assertArrayEquals(result.selection.toMask(m), runner.inputs.get(set).get("channel_mask").floats(), 0f);
    assertEquals(2, result.losses.size());
  }

  @Test
  public void budgetThatFitsNothingMeansNoUpdateOrABudgetException() throws Exception {
    ModelMetadata m = metadata();
    FakeRunner runner = new FakeRunner(m);
    AdaptationConfig config = new AdaptationConfig.Builder().iterations(5).budget(Budget.of(1, 0)).build();
    AdaptationResult result = new AdaptationDriver(m, checked(runner)).adapt(images(m, 4), new int[] {0, 1, 0, 1}, 2,
        ConfiguredPolicy.tinyTrain(), config, AdaptationListener.NONE, () -> false);
    assertTrue(result.selection.isEmpty());
    assertTrue(result.losses.isEmpty());
    assertEquals(-1, runner.calls.indexOf("train_step"));
    float[] mask = runner.inputs.get(runner.calls.indexOf("set_selection")).get("channel_mask").floats();
    assertArrayEquals(new float[m.maskLength()], mask, 0f);

    assertThrows(BudgetException.class, () -> new AdaptationDriver(m, checked(new FakeRunner(m))).adapt(images(m, 4),
        new int[] {0, 1, 0, 1}, 2, ConfiguredPolicy.tinyTrain(0.5, Criterion.TINYTRAIN, OnEmpty.RAISE), config,
        AdaptationListener.NONE, () -> false));
  }
}
