package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.ModelMetadata;

/** The test runner refuses what TFLite's Java {@code Interpreter.runSignature} refuses. */
public class ContractRunnerTest {
  private static ContractRunner runner(ModelMetadata m) {
    return AdaptationDriverTest.checked(new AdaptationDriverTest.FakeRunner(m));
  }

  @Test
  public void rejectsAnEmptyOrNullInputMapLikeTheRealApi() throws Exception {
    ContractRunner runner = runner(AdaptationDriverTest.metadata());
    for (String signature : List.of(Contract.GET_STATE, Contract.RESET_STATE, Contract.INFER)) {
      IllegalArgumentException err = assertThrows(IllegalArgumentException.class, () -> runner.run(signature, Map.of()));
      assertEquals("Input error: Inputs should not be null or empty.", err.getMessage());
      assertThrows(IllegalArgumentException.class, () -> runner.run(signature, null));
    }
    assertTrue(runner.calls.isEmpty());
    runner.run(Contract.RESET_STATE, Map.of(Contract.DUMMY, Tensor.scalar(0)));
    assertEquals(List.of(Contract.RESET_STATE), runner.calls);
  }

  @Test
  public void rejectsWrongNamesDtypesAndShapes() throws Exception {
    ModelMetadata m = AdaptationDriverTest.metadata();
    ContractRunner runner = runner(m);
    Tensor images = AdaptationDriverTest.images(m, 2);
    assertThrows(IllegalArgumentException.class, () -> runner.run("no_such_signature", Map.of("images", images)));
    assertThrows(IllegalArgumentException.class, () -> runner.run(Contract.INFER, Map.of("image", images)));
    assertThrows(IllegalArgumentException.class, () -> runner.run(Contract.FISHER, Map.of(Contract.IMAGES, images)));
    assertThrows(IllegalArgumentException.class, () -> runner.run(Contract.INFER,
        Map.of(Contract.IMAGES, Tensor.ofFloats(new int[] {1, 2, 2, 3}, new float[12]))));
    assertThrows(IllegalArgumentException.class, () -> runner.run(Contract.SET_HPARAMS,
        Map.of(Contract.LEARNING_RATE, Tensor.scalar(1))));
    assertThrows(IllegalArgumentException.class, () -> runner.run(Contract.RESET_STATE,
        Map.of(Contract.DUMMY, Tensor.ofInts(new int[] {1}, new int[] {0}))));
    assertTrue(runner.calls.isEmpty());
    assertEquals(2, runner.run(Contract.INFER, Map.of(Contract.IMAGES, images)).get(Contract.EMBEDDINGS).shape()[0]);
  }

  @Test
  public void requiresEveryDeclaredOutput() throws Exception {
    ModelMetadata m = AdaptationDriverTest.metadata();
    ContractRunner runner = new ContractRunner(ContractRunner.fromMetadata(m), (signature, in) -> {
      Map<String, Tensor> out = new LinkedHashMap<>();
      out.put(Contract.LOSS, Tensor.scalar(1f));
      return out;
    });
    Map<String, Tensor> in = Map.of(Contract.IMAGES, AdaptationDriverTest.images(m, 2),
        Contract.LABELS, Tensor.ofInts(new int[] {2}, new int[] {0, 1}));
    IllegalStateException err = assertThrows(IllegalStateException.class, () -> runner.run(Contract.TRAIN_STEP, in));
    assertTrue(err.getMessage(), err.getMessage().contains(Contract.ACCURACY));
  }
}
