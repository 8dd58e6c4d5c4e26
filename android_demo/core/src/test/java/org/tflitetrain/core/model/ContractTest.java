package org.tflitetrain.core.model;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;

import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tflitetrain.core.Resources;
import org.tflitetrain.core.json.Json;

/**
 * The hand-written logic of the generated {@link Contract} (its constants are generated from
 * {@code tflite_train/contract/} and checked by {@code tests/contract/test_contract.py}): state names per optimizer
 * equal Python's {@code contract.layer_state} (golden/contract.json).
 */
public class ContractTest {
  private static final Map<String, Object> GOLDEN = Resources.obj(Json.parse(Resources.text("/golden/contract.json")));

  @Test
  public void layerStateMatchesThePythonContract() {
    Map<String, Object> state = Resources.obj(GOLDEN.get("layer_state"));
    assertEquals(state.keySet(), Contract.OPTIMIZER_SLOTS.keySet());
    for (String optimizer : Contract.OPTIMIZER_SLOTS.keySet()) {
      assertEquals(state.get(optimizer), Contract.layerState("x", optimizer));
    }
  }

  @Test
  public void unknownOptimizerIsRefused() {
    IllegalArgumentException err = assertThrows(IllegalArgumentException.class, () -> Contract.layerState("x", "rmsprop"));
    assertEquals(true, err.getMessage().contains("rmsprop"));
  }

  @Test
  public void everySignatureOfTheContractIsListed() {
    assertEquals(List.of(Contract.INFER, Contract.FISHER, Contract.TRAIN_STEP, Contract.SET_HEAD, Contract.SET_SELECTION,
        Contract.SET_HPARAMS, Contract.GET_STATE, Contract.SET_STATE, Contract.RESET_STATE), Contract.SIGNATURE_NAMES);
  }
}
