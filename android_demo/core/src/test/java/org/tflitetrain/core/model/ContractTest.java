package org.tflitetrain.core.model;

import static org.junit.Assert.assertEquals;

import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tflitetrain.core.Resources;
import org.tflitetrain.core.json.Json;

/** {@link Contract} spells every name as {@code tflite_train/contract.py} does (golden/contract.json). */
public class ContractTest {
  private static final Map<String, Object> GOLDEN = Resources.obj(Json.parse(Resources.text("/golden/contract.json")));

  @Test
  public void signatureNamesAndOrderMatchThePythonContract() {
    assertEquals(GOLDEN.get("signatures"), Contract.SIGNATURES);
  }

  @Test
  public void tensorNamesMatchThePythonContract() {
    Map<String, Object> t = Resources.obj(GOLDEN.get("tensors"));
    assertEquals(t.get("images"), Contract.IMAGES);
    assertEquals(t.get("labels"), Contract.LABELS);
    assertEquals(t.get("prototypes"), Contract.PROTOTYPES);
    assertEquals(t.get("num_classes"), Contract.NUM_CLASSES);
    assertEquals(t.get("channel_mask"), Contract.CHANNEL_MASK);
    assertEquals(t.get("learning_rate"), Contract.LEARNING_RATE);
    assertEquals(t.get("dummy"), Contract.DUMMY);
    assertEquals(t.get("embeddings"), Contract.EMBEDDINGS);
    assertEquals(t.get("logits"), Contract.LOGITS);
    assertEquals(t.get("loss"), Contract.LOSS);
    assertEquals(t.get("accuracy"), Contract.ACCURACY);
    assertEquals(t.get("ok"), Contract.OK);
    Map<String, Object> inputs = Resources.obj(GOLDEN.get("inputs"));
    assertEquals(List.of(Contract.DUMMY), inputs.get(Contract.GET_STATE));
    assertEquals(List.of(Contract.DUMMY), inputs.get(Contract.RESET_STATE));
    for (Object names : inputs.values()) {
      assertEquals(false, Resources.list(names).isEmpty());
    }
  }

  @Test
  public void everyJavaFieldNameIsAFieldOfThePythonContract() {
    List<Object> fields = Resources.list(GOLDEN.get("fields"));
    for (String field : Contract.FIELDS) {
      assertEquals(field, true, fields.contains(field));
    }
  }

  @Test
  public void stateNamesAndFormatMatchThePythonContract() {
    Map<String, Object> state = Resources.obj(GOLDEN.get("layer_state"));
    for (String optimizer : List.of("adam", "sgd_momentum")) {
      assertEquals(state.get(optimizer), Contract.layerState("x", optimizer));
    }
    Map<String, Object> meta = Resources.obj(GOLDEN.get("metadata"));
    assertEquals(meta.get("name"), ModelMetadata.METADATA_NAME);
    assertEquals(meta.get("format"), ModelMetadata.FORMAT);
    assertEquals(((Number) meta.get("format_version")).intValue(), ModelMetadata.FORMAT_VERSION);
  }
}
