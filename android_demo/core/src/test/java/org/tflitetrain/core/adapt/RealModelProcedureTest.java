package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Assume;
import org.junit.Test;
import org.tflitetrain.core.adapt.AdaptationConfig.BatchMode;
import org.tflitetrain.core.adapt.AdaptationConfig.PrototypeMode;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.model.CachedCut;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.GraphSignature;
import org.tflitetrain.core.model.ModelMetadata;
import org.tflitetrain.core.model.TfliteMetadataReader;
import org.tflitetrain.core.select.Budget;

/**
 * The fine-tuning procedure's options on a real exported model (the tiny fixture, exported with the episode
 * signatures; real Fashion-MNIST images) through the checked runner and the Python bridge:
 *
 * <ul>
 *   <li>batch mode accumulate (B one-row {@code accumulate_from_<layer>} calls and one {@code apply_accumulated}
 *       per update) leaves the state of batch mode (ONE {@code train_step_from_<layer>} on the same B rows): every
 *       state tensor within 1e-4 of its largest magnitude, at most 0.1 % of its entries off by more than 1e-5 of
 *       it, losses within 1e-5 relative (the tolerances of {@code tests/runtime/adaptation/test_episode_steps.py}; measured
 *       4.0e-6 of the scale on LiteRT for one update of 6 rows);
 *   <li>the rate choice on 1-shot tasks (3-way and 2-way: nothing to hold out) picks rate 0 by
 *       {@link RateChoice#NO_HOLDOUT_RULE} and trains nothing; on a 3-shot task it scores every rate;
 *   <li>a batch over B_mem is reduced to the rows that fit, with the plan's note; episode prototypes whose
 *       N + B rows exceed B_mem fall back to refreshed ones.
 * </ul>
 */
public class RealModelProcedureTest {
  private static final String FIXTURE = "tiny_adam_33";
  private static final double STATE_TOL = 1e-4;
  private static final double OFF_TOL = 1e-5;
  private static final double OFF_FRACTION = 1e-3;

  private static Path fixture() {
    String dir = System.getProperty("tflitetrain.fixtures");
    Assume.assumeTrue("system property tflitetrain.fixtures not set", dir != null);
    return Paths.get(dir, FIXTURE + ".tflite");
  }

  /** The model, its graph and the bridge, with one support set of {@code ways} x {@code shots}. */
  private static final class Setup implements AutoCloseable {
    final ModelMetadata m;
    final Map<String, GraphSignature> graph;
    final BridgeRunner bridge;

    Setup() throws Exception {
      Path path = fixture();
      ByteBuffer file = ByteBuffer.wrap(Files.readAllBytes(path));
      m = ModelMetadata.load(file);
      graph = TfliteMetadataReader.signatures(file);
      bridge = new BridgeRunner(path);
      assertNotNull(FIXTURE + " has no apply_accumulated: re-export the fixtures", m.applyAccumulatedSignature);
    }

    Map<String, Object> episode(int ways, int shots) throws Exception {
      return bridge.call("{\"op\": \"episode\", \"ways\": " + ways + ", \"shots\": " + shots
          + ", \"queries\": 1, \"seed\": 3}");
    }

    Run adapt(Map<String, Object> episode, int ways, SelectionPolicy policy, AdaptationConfig config) throws Exception {
      ContractRunner runner = new ContractRunner(graph, bridge);
      AdaptationDriver driver = new AdaptationDriver(m, runner);
      Tensor support = BridgeRunner.tensorOf(episode.get("support"));
      int[] labels = BridgeRunner.tensorOf(episode.get("support_labels")).ints();
      AdaptationResult result = driver.adapt(support, labels, ways, policy, config, AdaptationListener.NONE,
          () -> false);
      return new Run(result, driver.getState(), runner);
    }

    @Override
    public void close() throws IOException {
      bridge.close();
    }
  }

  private static final class Run {
    final AdaptationResult result;
    final Map<String, Tensor> state;
    final ContractRunner runner;

    Run(AdaptationResult result, Map<String, Tensor> state, ContractRunner runner) {
      this.result = result;
      this.state = state;
      this.runner = runner;
    }

    int count(String signature) {
      return (int) runner.calls.stream().filter(signature::equals).count();
    }

    /** The row count of every call of {@code signature}'s activations. */
    List<Integer> rows(String signature) {
      List<Integer> out = new ArrayList<>();
      for (int i = 0; i < runner.calls.size(); i++) {
        if (runner.calls.get(i).equals(signature)) {
          out.add(runner.inputs.get(i).get(Contract.ACTIVATIONS).shape()[0]);
        }
      }
      return out;
    }
  }

  /** Half the channels of two candidates from the lowest cut's layer up (the cached runs use that cut). */
  private static SelectionPolicy aboveLowestCut(ModelMetadata m) {
    CachedCut lowest = m.cachedCuts.get(0);
    Map<String, int[]> channels = new LinkedHashMap<>();
    List<String> above = m.candidates.stream().filter(l -> m.table.indexOf(l) >= lowest.index).toList();
    for (String layer : List.of(above.get(0), above.get(above.size() - 1))) {
      int[] half = new int[Math.max(1, m.candidate(layer).outChannels / 2)];
      for (int c = 0; c < half.length; c++) {
        half[c] = 2 * c;
      }
      channels.put(layer, half);
    }
    return new FixedSelectionPolicy("above-" + lowest.layer, new Selection(m, channels));
  }

  private static AdaptationConfig.Builder config() {
    return new AdaptationConfig.Builder().evalBatchSize(8).learningRate(0.01f);
  }

  private static void assertStateClose(Map<String, Tensor> expected, Map<String, Tensor> actual) {
    assertEquals(expected.keySet(), actual.keySet());
    for (Map.Entry<String, Tensor> entry : expected.entrySet()) {
      Tensor want = entry.getValue();
      Tensor got = actual.get(entry.getKey());
      String key = entry.getKey();
      assertEquals(key, Arrays.toString(want.shape()), Arrays.toString(got.shape()));
      if (want.dtype != Tensor.DType.FLOAT32) {
        assertEquals(key, want, got);
        continue;
      }
      float[] a = want.floats();
      float[] b = got.floats();
      double scale = 1e-12;
      for (float v : a) {
        scale = Math.max(scale, Math.abs(v));
      }
      int off = 0;
      for (int i = 0; i < a.length; i++) {
        double diff = Math.abs((double) a[i] - b[i]);
        assertTrue(key + "[" + i + "]: " + a[i] + " vs " + b[i], diff <= STATE_TOL * scale);
        off += diff > OFF_TOL * scale ? 1 : 0;
      }
      assertTrue(key + ": " + off + " of " + a.length + " entries off", off <= OFF_FRACTION * a.length);
    }
  }

  @Test
  public void accumulatedRowsUpdateLikeOneBatchedStep() throws Exception {
    try (Setup s = new Setup()) {
      Map<String, Object> episode = s.episode(3, 2);
      SelectionPolicy policy = aboveLowestCut(s.m);
      CachedCut cut = s.m.cachedCuts.get(0);
      // one update, batch = the whole support set (6 rows, in order): both modes read the same rows
      Run batched = s.adapt(episode, 3, policy, config().iterations(1).batchSize(6).build());
      Run accumulated = s.adapt(episode, 3, policy,
          config().iterations(1).batchSize(6).batchMode(BatchMode.ACCUMULATE).build());

      assertEquals(BatchMode.BATCH, batched.result.updates.batchMode);
      assertEquals(List.of(6), batched.rows(cut.trainSignature));
      assertEquals(BatchMode.ACCUMULATE, accumulated.result.updates.batchMode);
      assertEquals("", accumulated.result.updates.note);
      assertEquals(1, accumulated.result.updates.rows);
      assertEquals(0, accumulated.count(cut.trainSignature));
      assertEquals(List.of(1, 1, 1, 1, 1, 1), accumulated.rows(cut.accumulateSignature));
      assertEquals(1, accumulated.count(s.m.applyAccumulatedSignature));
      // priced at one row: less backward memory than the batch of 6
      assertTrue(accumulated.result.cost.totalBytes() < batched.result.cost.totalBytes());
      for (int i = 0; i < 1; i++) {
        float want = batched.result.losses.get(i);
        assertEquals("loss of update " + (i + 1), want, accumulated.result.losses.get(i), 1e-5 * Math.abs(want));
      }
      assertStateClose(batched.state, accumulated.state);
    }
  }

  @Test
  public void rateChoiceWithoutHeldOutImagesTakesNoUpdate() throws Exception {
    try (Setup s = new Setup()) {
      SelectionPolicy policy = aboveLowestCut(s.m);
      CachedCut cut = s.m.cachedCuts.get(0);
      for (int ways : new int[] {3, 2}) {
        Map<String, Object> episode = s.episode(ways, 1);
        Run run = s.adapt(episode, ways, policy,
            config().iterations(3).batchSize(ways).rateChoice(0f, 1e-2f, 1e-1f).build());
        RateChoice choice = run.result.rateChoice;
        assertNotNull(choice);
        assertEquals(ways + "-way 1-shot", 0f, choice.rate, 0f);
        assertEquals(0, choice.heldOut);
        assertEquals(RateChoice.NO_HOLDOUT_RULE, choice.reason);
        assertEquals(List.of(), run.result.losses);
        assertEquals(0, run.count(cut.trainSignature) + run.count(Contract.TRAIN_STEP));
        // the state after the head: no optimizer step was taken
        Tensor step = run.state.get(Contract.STEP);
        assertEquals(0f, step.floatValue(), 0f);
      }
    }
  }

  @Test
  public void rateChoiceScoresEveryRateOnHeldOutImages() throws Exception {
    try (Setup s = new Setup()) {
      Map<String, Object> episode = s.episode(3, 3);
      CachedCut cut = s.m.cachedCuts.get(0);
      Run run = s.adapt(episode, 3, aboveLowestCut(s.m), config().iterations(2).batchSize(4).choiceUpdates(2)
          .rateChoice(0f, 1e-2f).prototypeMode(PrototypeMode.REFRESH)
          .choiceScore(AdaptationConfig.ChoiceScore.ACCURACY_LOSS).build());
      RateChoice choice = run.result.rateChoice;
      assertEquals(6, choice.heldOut);
      assertEquals(2, choice.rates().length);
      // the choice fine-tunes 1e-2 on the 3 prototype images (batch capped at K = 3) for 2 updates
      List<Integer> rows = run.rows(cut.trainSignature);
      assertEquals(rows.toString(), List.of(3, 3), rows.subList(0, 2));
      int finalUpdates = choice.rate == 0f ? 0 : 2;
      assertEquals(2 + finalUpdates, rows.size());
      assertEquals(finalUpdates, run.result.losses.size());
    }
  }

  @Test
  public void aBatchOverTheMemoryBudgetIsReducedWithANote() throws Exception {
    try (Setup s = new Setup()) {
      Map<String, Object> episode = s.episode(3, 2);
      SelectionPolicy policy = aboveLowestCut(s.m);
      Selection selection = policy.select(s.m, null, null, 1);
      CachedCut cut = s.m.cachedCuts.get(0);
      long twoRows = CostModel.backwardCostByName(s.m.table, selection.channelCounts(), s.m.optimizer.optimizer, 2,
          true).totalBytes();
      Budget budget = new Budget(twoRows, null, null);
      Run run = s.adapt(episode, 3, policy, config().iterations(2).batchSize(5).budget(budget).build());
      assertEquals(2, run.result.updates.batch);
      assertEquals("a batch of 5 pseudo-queries exceeds B_mem: reduced to 2", run.result.updates.note);
      assertEquals(List.of(2, 2), run.rows(cut.trainSignature));
      assertTrue(run.result.cost.totalBytes() <= twoRows);

      // episode prototypes: 6 support + 5 rows exceed B_mem -> refreshed prototypes, batch reduced as well
      Run episodic = s.adapt(episode, 3, policy, config().iterations(2).batchSize(5).budget(budget)
          .prototypeMode(PrototypeMode.EPISODE).build());
      assertEquals(PrototypeMode.REFRESH, episodic.result.updates.prototypeMode);
      assertEquals("an episode step of 6 support + 5 pseudo-query rows exceeds B_mem: prototypes refreshed without "
          + "gradient instead; a batch of 5 pseudo-queries exceeds B_mem: reduced to 2", episodic.result.updates.note);
      assertEquals(0, episodic.count(cut.episodeSignature));

      // unbounded: the episode step runs with the support rows and the pseudo-queries in one call
      Run fits = s.adapt(episode, 3, policy, config().iterations(2).batchSize(4).prototypeMode(PrototypeMode.EPISODE)
          .build());
      assertEquals(PrototypeMode.EPISODE, fits.result.updates.prototypeMode);
      assertEquals(List.of(10, 10), fits.rows(cut.episodeSignature));
      assertEquals(0, fits.count(cut.trainSignature));
    }
  }
}
