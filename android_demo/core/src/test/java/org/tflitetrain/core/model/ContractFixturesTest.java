package org.tflitetrain.core.model;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.Test;

/**
 * Every exported fixture against the contract: every signature (in the metadata and in the graph) takes
 * at least one input, {@link ModelMetadata#load} accepts the file, and metadata that lies about the graph
 * (class capacity, input size, an extra candidate layer, a dropped signature, a cached cut's activation
 * shape; rewritten into a copy of the file) is refused by {@link ModelMetadata#load} naming the field.
 */
public class ContractFixturesTest {
  private static ByteBuffer bytes(Path model) throws Exception {
    return ByteBuffer.wrap(Files.readAllBytes(model));
  }

  @Test
  public void everySignatureOfEveryExportedModelHasAnInput() throws Exception {
    for (Path model : ExportedModelFixturesTest.models()) {
      ByteBuffer file = bytes(model);
      ModelMetadata meta = ModelMetadata.load(file);
      Map<?, ?> declared = (Map<?, ?>) meta.raw.get(Contract.F_SIGNATURES);
      for (String name : Contract.SIGNATURE_NAMES) {
        assertTrue(model + " lacks " + name, declared.containsKey(name));
      }
      for (Map.Entry<?, ?> entry : declared.entrySet()) {
        List<?> inputs = (List<?>) ((Map<?, ?>) entry.getValue()).get(Contract.F_INPUTS);
        assertFalse(model + ": metadata signature " + entry.getKey() + " has no input", inputs.isEmpty());
      }
      Map<String, GraphSignature> graph = TfliteMetadataReader.signatures(file);
      assertEquals(model.toString(), declared.keySet(), graph.keySet());
      for (GraphSignature sig : graph.values()) {
        assertFalse(model + ": graph signature " + sig.name + " has no input", sig.inputs.isEmpty());
      }
      assertEquals(List.of(Contract.DUMMY), List.copyOf(graph.get(Contract.GET_STATE).inputs.keySet()));
      assertEquals(List.of(Contract.DUMMY), List.copyOf(graph.get(Contract.RESET_STATE).inputs.keySet()));
    }
  }

  private static String json(ByteBuffer file) throws Exception {
    return new String(TfliteMetadataReader.read(file, ModelMetadata.METADATA_NAME), StandardCharsets.UTF_8);
  }

  /** The metadata with the first integer value of {@code key} incremented by {@code delta}. */
  private static String bump(String json, String key, int delta) {
    Matcher m = Pattern.compile("\"" + key + "\": (\\d+)").matcher(json);
    assertTrue(key, m.find());
    return json.substring(0, m.start(1)) + (Integer.parseInt(m.group(1)) + delta) + json.substring(m.end(1));
  }

  /**
   * Loading the model file whose metadata JSON is replaced, in place, by {@code edited} (padded with spaces;
   * the informative selftest description is shortened to make room) fails; returns the message.
   */
  private String refusal(String edited, Map<String, GraphSignature> graph) throws Exception {
    String shorter = edited.replace("\"npz (see tflite_train.runtime.model.selftest)\"", "\"npz\"");
    byte[] old = json.getBytes(StandardCharsets.UTF_8);
    byte[] now = shorter.getBytes(StandardCharsets.UTF_8);
    assertTrue("edited metadata longer than the original", now.length <= old.length);
    byte[] data = file.array().clone();
    int at = indexOf(data, old);
    assertTrue("metadata JSON not found in the file", at >= 0);
    Arrays.fill(data, at, at + old.length, (byte) ' ');
    System.arraycopy(now, 0, data, at, now.length);
    ModelChecksumTest.reseal(data);  // an edit that keeps the seal valid: the contract check must catch the lie
    ModelMetadataException err = assertThrows(ModelMetadataException.class, () -> ModelMetadata.load(ByteBuffer.wrap(data)));
    // The graph-level check alone (metadata parsed, graph from the untouched file) refuses it the same way.
    assertEquals(err.getMessage(), assertThrows(ModelMetadataException.class,
        () -> ModelMetadata.parse(edited).validateGraph(graph)).getMessage());
    return err.getMessage();
  }

  private static int indexOf(byte[] data, byte[] needle) {
    outer:
    for (int i = 0; i + needle.length <= data.length; i++) {
      for (int j = 0; j < needle.length; j++) {
        if (data[i + j] != needle[j]) {
          continue outer;
        }
      }
      return i;
    }
    return -1;
  }

  private ByteBuffer file;
  private String json;

  @Test
  public void metadataThatLiesAboutTheGraphIsRefusedNamingTheField() throws Exception {
    Path model = ExportedModelFixturesTest.models().get(0);
    file = bytes(model);
    Map<String, GraphSignature> graph = TfliteMetadataReader.signatures(file);
    json = json(file);
    ModelMetadata meta = ModelMetadata.parse(json);
    meta.validateGraph(graph);

    String capacity = refusal(bump(json, "class_capacity", 1), graph);
    assertTrue(capacity, capacity.contains("class_capacity = " + (meta.classCapacity + 1)));
    assertTrue(capacity, capacity.contains("graph has " + meta.classCapacity));

    String size = refusal(bump(json, "height", 2), graph);
    assertTrue(size, size.contains("input.height = " + (meta.input.height + 2)));

    // An extra candidate: the layer just below the first candidate, flagged and listed.
    String first = meta.candidates.get(0);
    MetadataLayer below = meta.layers.get(meta.table.indexOf(first) - 1);
    String extra = below.spec.name;
    Matcher layer = Pattern.compile("\"name\": \"" + Pattern.quote(extra) + "\"[^}]*?\"candidate\": (false)")
        .matcher(json);
    assertTrue(layer.find());
    String edited = json.substring(0, layer.start(1)) + "true" + json.substring(layer.end(1));
    edited = edited.replace("\"candidates\": [\"" + first + "\"", "\"candidates\": [\"" + extra + "\", \"" + first + "\"");
    assertNotEquals(json, edited);
    String candidate = refusal(edited, graph);
    assertTrue(candidate, candidate.contains("candidates[" + extra + "]"));

    String dropped = json.replaceFirst("\"reset_state\": \\{[^}]*\\}, ", "").replaceFirst(", \"reset_state\": \\{[^}]*\\}", "");
    assertNotEquals(json, dropped);
    String signature = refusal(dropped, graph);
    assertTrue(signature, signature.contains("signatures") && signature.contains("reset_state"));
  }

  /** The first exported fixture whose metadata has {@code what}. */
  private static Path firstFixture(Predicate<ModelMetadata> has, String what) throws Exception {
    for (Path candidate : ExportedModelFixturesTest.models()) {
      if (has.test(ModelMetadata.load(bytes(candidate)))) {
        return candidate;
      }
    }
    throw new AssertionError("no exported fixture has " + what + ": re-export the fixtures");
  }

  @Test
  public void aCachedCutThatLiesAboutItsActivationIsRefusedNamingTheField() throws Exception {
    file = bytes(firstFixture(meta -> !meta.cachedCuts.isEmpty(), "cached_cuts"));
    Map<String, GraphSignature> graph = TfliteMetadataReader.signatures(file);
    json = json(file);
    CachedCut cut = ModelMetadata.parse(json).cachedCuts.get(0);
    // the first cached_cuts entry's first shape dimension, one larger
    Matcher shape = Pattern.compile("\"" + Contract.F_SHAPE + "\": \\[(\\d+)")
        .matcher(json.substring(json.indexOf("\"" + Contract.F_CACHED_CUTS + "\"")));
    assertTrue(shape.find());
    int at = json.indexOf("\"" + Contract.F_CACHED_CUTS + "\"") + shape.start(1);
    String edited = json.substring(0, at) + (Integer.parseInt(shape.group(1)) + 1)
        + json.substring(at + shape.group(1).length());
    String message = refusal(edited, graph);
    assertTrue(message, message.contains("metadata " + Contract.F_CACHED_CUTS + "[" + cut.layer + "]." + Contract.F_SHAPE
        + " = [" + (cut.shape()[0] + 1)));
  }

  @Test
  public void aMissingEpisodeOrAccumulationSignatureIsRefusedNamingIt() throws Exception {
    file = bytes(firstFixture(meta -> meta.applyAccumulatedSignature != null, "episode signatures"));
    Map<String, GraphSignature> graph = TfliteMetadataReader.signatures(file);
    json = json(file);
    ModelMetadata meta = ModelMetadata.parse(json);
    CachedCut cut = meta.cachedCuts.get(0);
    assertNotNull(cut.episodeSignature);
    // the graph lacks a signature the metadata names: validated as if the file had no such signature
    for (String name : List.of(cut.episodeSignature, cut.accumulateSignature, meta.applyAccumulatedSignature)) {
      Map<String, GraphSignature> without = new LinkedHashMap<>(graph);
      without.remove(name);
      ModelMetadataException err = assertThrows(ModelMetadataException.class, () -> meta.validateGraph(without));
      assertTrue(err.getMessage(), err.getMessage().contains("signatures." + name) && !err.getMessage().contains("\n"));
    }
    // the metadata drops an episode signature from `signatures` while its cut still names it
    String dropped = json.replaceFirst("\"" + Pattern.quote(cut.episodeSignature) + "\": \\{[^}]*\\}, ", "");
    assertNotEquals(json, dropped);
    String message = refusal(dropped, graph);
    assertTrue(message, message.contains(Contract.F_SIGNATURES) && message.contains(cut.episodeSignature));
  }
}
