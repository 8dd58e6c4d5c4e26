package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import org.junit.Test;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.ModelMetadata;
import org.tflitetrain.core.select.Budget;

/**
 * {@link AdaptationConfig}'s defaults are the default adaptation protocol (the generated
 * {@code Contract.PROTOCOL_*}, from Python's {@code DEFAULT_PROTOCOL}; {@code tests/contract/test_contract.py} keeps
 * them in step), and {@link AdaptationDriver} runs its steps and budget.
 */
public class AdaptationConfigTest {
  /** A policy that records the budget and batch size the driver hands it, then returns a fixed selection. */
  private static final class RecordingPolicy implements SelectionPolicy {
    final Selection selection;
    final List<Budget> budgets = new ArrayList<>();
    final List<Integer> batchSizes = new ArrayList<>();

    RecordingPolicy(Selection selection) {
      this.selection = selection;
    }

    @Override
    public Selection select(ModelMetadata metadata, FisherScores fisher, Budget budget, int batchSize) {
      budgets.add(budget);
      batchSizes.add(batchSize);
      return selection;
    }

    @Override
    public String name() {
      return "recording";
    }
  }

  /** An adaptation of {@code n} images (labels 0, 1, 0, 1, ...) under {@code config}; the policy records. */
  private static AdaptationResult adapt(ModelMetadata m, RecordingPolicy policy, int n, AdaptationConfig config,
      List<Integer> totals) throws Exception {
    int[] labels = new int[n];
    for (int i = 0; i < n; i++) {
      labels[i] = i % 2;
    }
    AdaptationListener listener = new AdaptationListener() {
      @Override
      public void onStage(Stage stage) {}

      @Override
      public void onStep(int step, int total, float loss, float accuracy) {
        totals.add(total);
      }
    };
    AdaptationDriverTest.FakeRunner fake = new AdaptationDriverTest.FakeRunner(m);
    return new AdaptationDriver(m, AdaptationDriverTest.checked(fake)).adapt(AdaptationDriverTest.images(m, n), labels,
        2, policy, config, listener, () -> false);
  }

  private static RecordingPolicy lastLayer(ModelMetadata m) {
    return new RecordingPolicy(FixedSelectionPolicy.lastLayer(m).select(m, null, Budget.unlimited(), 1));
  }

  @Test
  public void builderDefaultsAreTheGeneratedProtocol() {
    AdaptationConfig config = new AdaptationConfig.Builder().build();
    assertEquals(OptionalInt.of(Contract.PROTOCOL_EPOCHS), config.epochs);
    assertEquals(OptionalInt.empty(), config.iterations);
    assertEquals(Contract.PROTOCOL_BATCH_SIZE, config.batchSize);
    assertEquals(Contract.PROTOCOL_COMPUTE_FRACTION, config.budget.computeFraction, 0);
    assertNull(config.budget.computeMacs);
    assertEquals(Double.POSITIVE_INFINITY, config.budget.memoryBytes, 0);
    // NaN = the model's own learning rate (no set_hparams call); JUnit's float equality holds NaN == NaN
    assertEquals((float) Contract.PROTOCOL_LEARNING_RATE, config.learningRate, 0f);
  }

  @Test
  public void defaultStepsAreThePassesOverTheSupportSet() {
    AdaptationConfig config = new AdaptationConfig.Builder().build();
    // the paper's protocol: 40 passes at batch 1 = 1,000 steps for 25 support images
    assertEquals(1000, config.steps(25));
    assertEquals(Contract.PROTOCOL_EPOCHS * ((25 + Contract.PROTOCOL_BATCH_SIZE - 1) / Contract.PROTOCOL_BATCH_SIZE),
        config.steps(25));
    AdaptationConfig three = new AdaptationConfig.Builder().epochs(3).batchSize(4).build();
    assertEquals(3 * 3, three.steps(10)); // ceil(10 / 4) = 3 steps per pass
    assertEquals(3 * 2, three.steps(8));
    assertEquals(3, three.steps(2)); // a batch of at least N: one step per pass
    assertEquals(3, new AdaptationConfig.Builder().epochs(3).batchSize(0).build().steps(10)); // 0: the whole set
  }

  @Test
  public void iterationsReplaceTheEpochs() {
    AdaptationConfig config = new AdaptationConfig.Builder().iterations(7).build();
    assertEquals(OptionalInt.of(7), config.iterations);
    assertEquals(OptionalInt.empty(), config.epochs);
    assertEquals(7, config.steps(25));
    assertEquals(7, config.steps(1));
    assertEquals(0, new AdaptationConfig.Builder().iterations(0).build().steps(25));
  }

  @Test
  public void invalidLengthsNameTheirField() {
    assertTrue(assertThrows(IllegalArgumentException.class, () -> new AdaptationConfig.Builder().epochs(0))
        .getMessage().startsWith("epochs must be >= 1"));
    assertTrue(assertThrows(IllegalArgumentException.class, () -> new AdaptationConfig.Builder().iterations(-1))
        .getMessage().startsWith("iterations must be >= 0"));
    String both = assertThrows(IllegalArgumentException.class,
        () -> new AdaptationConfig.Builder().epochs(2).iterations(5).build()).getMessage();
    assertTrue(both, both.startsWith("epochs (2) and iterations (5) are two training lengths"));
    AdaptationConfig config = new AdaptationConfig.Builder().build();
    assertTrue(assertThrows(IllegalArgumentException.class, () -> config.steps(0)).getMessage()
        .startsWith("numSupport must be >= 1"));
    AdaptationConfig huge = new AdaptationConfig.Builder().epochs(Integer.MAX_VALUE).build();
    assertTrue(assertThrows(IllegalArgumentException.class, () -> huge.steps(2)).getMessage().startsWith("epochs "));
  }

  @Test
  public void driverRunsTheProtocolsStepsByDefault() throws Exception {
    ModelMetadata m = AdaptationDriverTest.metadata();
    RecordingPolicy policy = lastLayer(m);
    List<Integer> totals = new ArrayList<>();
    AdaptationResult result = adapt(m, policy, 5, new AdaptationConfig.Builder().build(), totals);
    int expected = Contract.PROTOCOL_EPOCHS * ((5 + Contract.PROTOCOL_BATCH_SIZE - 1) / Contract.PROTOCOL_BATCH_SIZE);
    assertEquals(expected, result.losses.size());
    assertEquals(expected, totals.size());
    assertEquals(expected, (int) totals.get(0));
    assertEquals(List.of(Math.min(Contract.PROTOCOL_BATCH_SIZE, 5)), policy.batchSizes);
    assertEquals(Math.min(Contract.PROTOCOL_BATCH_SIZE, 5), result.batchSize);

    totals.clear();
    AdaptationResult fixed = adapt(m, lastLayer(m), 5, new AdaptationConfig.Builder().iterations(3).build(), totals);
    assertEquals(3, fixed.losses.size());
    assertEquals(List.of(3, 3, 3), totals);
    AdaptationResult passes = adapt(m, lastLayer(m), 5, new AdaptationConfig.Builder().epochs(2).batchSize(2).build(),
        new ArrayList<>());
    assertEquals(2 * 3, passes.losses.size());
  }

  @Test
  public void driverHandsThePolicyTheProtocolsComputeFraction() throws Exception {
    ModelMetadata m = AdaptationDriverTest.metadata();
    RecordingPolicy policy = lastLayer(m);
    AdaptationResult result = adapt(m, policy, 4, new AdaptationConfig.Builder().iterations(1).build(),
        new ArrayList<>());
    assertEquals(1, policy.budgets.size());
    Budget used = policy.budgets.get(0);
    assertEquals(Contract.PROTOCOL_COMPUTE_FRACTION, used.computeFraction, 0);
    assertNull(used.computeMacs);
    double limit = Contract.PROTOCOL_COMPUTE_FRACTION * CostModel.fullBackwardMacs(m.table);
    assertTrue(limit > 0);
    assertEquals(limit, used.computeLimit(m.table), 0);
    assertEquals(limit, result.computeLimitMacs, 0);

    // an explicit budget replaces the default one
    RecordingPolicy unlimited = lastLayer(m);
    AdaptationResult free = adapt(m, unlimited, 4,
        new AdaptationConfig.Builder().iterations(1).budget(Budget.unlimited()).build(), new ArrayList<>());
    assertNull(unlimited.budgets.get(0).computeFraction);
    assertEquals(Double.POSITIVE_INFINITY, free.computeLimitMacs, 0);
  }

  @Test
  public void theDefaultComputeBudgetBindsTinyTrain() throws Exception {
    ModelMetadata m = AdaptationDriverTest.metadata();
    int[] labels = {0, 1, 0, 1};
    AdaptationResult bounded = new AdaptationDriver(m, AdaptationDriverTest.checked(new AdaptationDriverTest.FakeRunner(m)))
        .adapt(AdaptationDriverTest.images(m, 4), labels, 2, ConfiguredPolicy.tinyTrain(),
            new AdaptationConfig.Builder().iterations(1).build(), AdaptationListener.NONE, () -> false);
    AdaptationResult free = new AdaptationDriver(m, AdaptationDriverTest.checked(new AdaptationDriverTest.FakeRunner(m)))
        .adapt(AdaptationDriverTest.images(m, 4), labels, 2, ConfiguredPolicy.tinyTrain(),
            new AdaptationConfig.Builder().iterations(1).budget(Budget.unlimited()).build(), AdaptationListener.NONE,
            () -> false);
    assertTrue(bounded.cost.backwardMacs() <= bounded.computeLimitMacs);
    assertTrue("the protocol's compute budget must leave out some of what an unlimited one selects",
        bounded.selection.channels().size() < free.selection.channels().size());
  }

  @Test
  public void procedureDefaultsArePythonsAndOptionsAreChecked() {
    AdaptationConfig defaults = new AdaptationConfig.Builder().build();
    assertEquals(AdaptationConfig.PrototypeMode.FIXED, defaults.prototypeMode);
    assertEquals(AdaptationConfig.BatchMode.BATCH, defaults.batchMode);
    assertNull(defaults.rateChoice());
    assertEquals(AdaptationConfig.ChoiceScore.ACCURACY, defaults.choiceScore);
    assertEquals(defaults.steps(25), defaults.choiceSteps(25));
    assertEquals(4, defaults.rowsPerCall(25, 4));

    AdaptationConfig options = new AdaptationConfig.Builder().rateChoice(0f, 1e-3f).choiceUpdates(7)
        .batchMode(AdaptationConfig.BatchMode.ACCUMULATE).choiceScore(AdaptationConfig.ChoiceScore.ACCURACY_LOSS).build();
    assertEquals(2, options.rateChoice().length);
    assertEquals(7, options.choiceSteps(25));
    assertEquals(1, options.rowsPerCall(25, 4));
    assertEquals(29, new AdaptationConfig.Builder().prototypeMode(AdaptationConfig.PrototypeMode.EPISODE).build()
        .rowsPerCall(25, 4));
    assertEquals(AdaptationConfig.PrototypeMode.REFRESH, AdaptationConfig.PrototypeMode.fromName("refresh"));
    assertThrows(IllegalArgumentException.class, () -> new AdaptationConfig.Builder().rateChoice(0f, -1f));
    assertThrows(IllegalArgumentException.class, () -> new AdaptationConfig.Builder().rateChoice(Float.NaN));
    assertThrows(IllegalArgumentException.class, () -> new AdaptationConfig.Builder().choiceUpdates(0));
    assertThrows(IllegalArgumentException.class, () -> AdaptationConfig.BatchMode.fromName("accumulated"));
  }
}
