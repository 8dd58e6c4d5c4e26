package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tflitetrain.core.model.ModelMetadata;

/** The shared checkpoint format on the JVM: slices round trip, corruption and a foreign model are refused. */
public class CheckpointTest {
  @Test
  public void slicesTakeAndPutAlongAnAxis() {
    Tensor t = Tensor.ofFloats(new int[] {2, 3, 2}, new float[] {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
    Tensor slice = Checkpoint.take(t, 1, new int[] {2, 0});
    assertArrayEquals(new int[] {2, 2, 2}, slice.shape());
    assertArrayEquals(new float[] {4, 5, 0, 1, 10, 11, 6, 7}, slice.floats(), 0);
    Tensor back = Checkpoint.put(Tensor.ofFloats(new int[] {2, 3, 2}, new float[12]), 1, new int[] {2, 0}, slice);
    assertArrayEquals(new float[] {0, 1, 0, 0, 4, 5, 6, 7, 0, 0, 10, 11}, back.floats(), 0);
  }

  @Test
  public void roundTripsAndRefusesCorruptOrForeignFiles() throws Exception {
    ModelMetadata m = AdaptationDriverTest.metadata();
    AdaptationDriverTest.FakeRunner fake = new AdaptationDriverTest.FakeRunner(m);
    AdaptationDriver driver = new AdaptationDriver(m, AdaptationDriverTest.checked(fake));
    Map<String, Tensor> exported = new LinkedHashMap<>(driver.getState());
    exported.put("prototypes", Tensor.ofFloats(new int[] {m.classCapacity, m.featureDim},
        new float[m.classCapacity * m.featureDim]));
    // An adapted state: prototypes [K, D] with 3 classes, layer values differing from the exported ones.
    Map<String, Tensor> adapted = new LinkedHashMap<>(exported);
    float[] protos = new float[m.classCapacity * m.featureDim];
    for (int i = 0; i < protos.length; i++) {
      protos[i] = i;
    }
    adapted.put("prototypes", Tensor.ofFloats(new int[] {m.classCapacity, m.featureDim}, protos));
    adapted.put("learning_rate", Tensor.scalar(0.5f));
    String layer = m.candidates.get(0);
    adapted.put(layer + "_bias", Tensor.ofFloats(new int[] {2}, new float[] {7, 8}));
    Selection selection = new Selection(m, Map.of(layer, new int[] {1}));
    byte[] data = Checkpoint.encode(m, adapted, selection, "fixed", false, List.of("a", "b", "c"));

    Checkpoint checkpoint = Checkpoint.decode(data, "mem");
    assertEquals(List.of("a", "b", "c"), checkpoint.classNames);
    Map<String, Tensor> restored = checkpoint.restore(m, exported);
    assertArrayEquals(new float[] {exported.get(layer + "_bias").floats()[0], 8}, restored.get(layer + "_bias").floats(), 0);
    assertEquals(1f, restored.get(layer + "_mask").floats()[1], 0);
    assertEquals(0.5f, restored.get("learning_rate").floatValue(), 0);
    assertEquals(3 * m.featureDim - 1, restored.get("prototypes").floats()[3 * m.featureDim - 1], 0);
    assertEquals(0f, restored.get("prototypes").floats()[3 * m.featureDim], 0);

    byte[] corrupt = data.clone();
    corrupt[40] ^= 1;
    assertTrue(assertThrows(IOException.class, () -> Checkpoint.decode(corrupt, "mem")).getMessage().contains("sha256"));
    byte[] truncated = java.util.Arrays.copyOf(data, data.length - 1);
    assertThrows(IOException.class, () -> Checkpoint.decode(truncated, "mem"));
    ModelMetadata other = ModelMetadata.parse(AdaptationDriverTest.metadataText().replace(m.modelId, "f".repeat(64)));
    IOException foreign = assertThrows(IOException.class, () -> checkpoint.restore(other, exported));
    assertTrue(foreign.getMessage(), foreign.getMessage().contains("refusing"));
  }
}
