package org.tflitetrain.core.model;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;
import org.junit.Assume;
import org.junit.Test;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.cost.LayerCost;
import org.tflitetrain.core.cost.LayerSpec;
import org.tflitetrain.core.json.Json;

/**
 * Reads the real exported test models ({@code python -m tools.fixtures --out build/test-models})
 * with {@link TfliteMetadataReader} and {@link ModelMetadata}, and checks each against its resolved
 * export config ({@code <model>.tflite.config.json}, written by the exporter beside the file), against
 * the Java cost model, and against the shapes of the embedded self-test arrays (an npz archive).
 *
 * <p>The directory comes from the system property {@value #PROPERTY} ({@code make test-java} sets it
 * to {@code build/test-models} after exporting them). Unset: the test is skipped (e.g. an IDE run);
 * set but missing or empty: the test fails, naming the directory and the command that makes it.
 */
public class ExportedModelFixturesTest {
  static final String PROPERTY = "tflitetrain.fixtures";
  static final String SELFTEST_NAME = "tflite_train_selftest";
  private static final Pattern SHAPE = Pattern.compile("'shape':\\s*\\(([^)]*)\\)");

  /** The exported models, sorted by name; fails clearly when the property names no usable directory. */
  static List<Path> models() throws IOException {
    String dir = System.getProperty(PROPERTY);
    Assume.assumeTrue("system property " + PROPERTY + " not set: exported-model checks skipped", dir != null);
    Path root = Paths.get(dir);
    if (!Files.isDirectory(root)) {
      fail(PROPERTY + "=" + dir + " is not a directory (absolute: " + root.toAbsolutePath()
          + "); run `python -m tools.fixtures --out " + dir + "` in the main environment (make fixtures)");
    }
    List<Path> out = new ArrayList<>();
    try (DirectoryStream<Path> files = Files.newDirectoryStream(root, "*.tflite")) {
      files.forEach(out::add);
    }
    if (out.isEmpty()) {
      fail("no *.tflite files in " + root.toAbsolutePath() + " (" + PROPERTY + "); run `python -m tools.fixtures --out "
          + dir + "` in the main environment (make fixtures)");
    }
    out.sort(null);
    return out;
  }

  private static ByteBuffer bytes(Path model) throws IOException {
    return ByteBuffer.wrap(Files.readAllBytes(model));
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> config(Path model) throws IOException {
    Path path = model.resolveSibling(model.getFileName() + ".config.json");
    if (!Files.exists(path)) {
      fail("missing " + path + ": the exporter writes the resolved config beside every model; re-export the fixtures");
    }
    return (Map<String, Object>) Json.parse(Files.readString(path, StandardCharsets.UTF_8));
  }

  private static List<Double> doubles(Object list) {
    List<Double> out = new ArrayList<>();
    for (Object value : (List<?>) list) {
      out.add(((Number) value).doubleValue());
    }
    return out;
  }

  /** The model's candidates as the exporter defines them: last k blocks + final conv (+ stem when k = all blocks). */
  private static List<String> expectedCandidates(ModelMetadata meta, int candidateBlocks) {
    List<String> out = new ArrayList<>();
    boolean all = candidateBlocks == meta.table.numBlocks();
    Set<Integer> last = new HashSet<>(meta.table.lastBlocks(candidateBlocks));
    for (LayerSpec layer : meta.table.layers()) {
      if (last.contains(layer.index) || (all && layer.index == 0)) {
        out.add(layer.name);
      }
    }
    return out;
  }

  /** The candidates of a user-model fixture's spec ("blocks:K" or "all"; converters.graph.region). */
  private static List<String> expectedCandidates(ModelMetadata meta, String spec) {
    if (spec.equals("all")) {
      List<String> out = new ArrayList<>();
      for (LayerSpec layer : meta.table.layers()) {
        out.add(layer.name);
      }
      return out;
    }
    assertTrue(spec, spec.startsWith("blocks:"));
    return expectedCandidates(meta, Integer.parseInt(spec.substring("blocks:".length())));
  }

  private static boolean userModel(Map<String, Object> config) {
    return "keras".equals(config.get("backbone"));
  }

  @Test
  public void metadataMatchesTheExportConfig() throws Exception {
    for (Path model : models()) {
      String name = model.getFileName().toString();
      ModelMetadata meta = ModelMetadata.fromTflite(bytes(model));
      Map<String, Object> config = config(model);
      assertEquals(name, 1, meta.formatVersion);
      assertEquals(name, config.get("backbone"), meta.backbone);
      assertEquals(name, 64, meta.modelId.length());
      assertEquals(name, ((Number) config.get("class_capacity")).intValue(), meta.classCapacity);
      assertEquals(name, ((Number) config.get("cosine_scale")).doubleValue(), meta.headScale, 0.0);
      assertEquals(name, config.get("optimizer"), meta.optimizer.optimizer.wireName);
      assertEquals(name, ((Number) config.get("learning_rate")).doubleValue(), meta.optimizer.learningRate, 0.0);
      if (userModel(config)) {  // a user's Keras model: its own input size and preprocessing
        assertTrue(name, name.startsWith("byo_"));
        String spec = (String) config.get("candidates");
        assertEquals(name, expectedCandidates(meta, spec), meta.candidates);
        assertTrue(name, meta.input.rangeHigh == 1.0 || meta.input.rangeHigh == 255.0);
        continue;
      }
      assertTrue(name, name.startsWith(meta.backbone + "_"));
      List<Double> size = doubles(config.get("input_size"));
      assertEquals(name, size.get(0).intValue(), meta.input.height);
      assertEquals(name, size.get(1).intValue(), meta.input.width);
      assertEquals(name, ((Number) config.get("in_channels")).intValue(), meta.input.channels);
      boolean rawPixels = "lite0".equals(meta.backbone);  // EfficientNet-Lite0 normalises (x - 127) / 128 itself
      List<Double> channels = new ArrayList<>();
      for (int c = 0; c < meta.input.channels; c++) {
        channels.add(rawPixels ? 127.0 : 0.0);
      }
      assertEquals(name, config.get("mean") == Json.NULL ? channels : doubles(config.get("mean")), meta.input.mean);
      channels.replaceAll(v -> rawPixels ? 128.0 : 1.0);
      assertEquals(name, config.get("std") == Json.NULL ? channels : doubles(config.get("std")), meta.input.std);
      assertEquals(name, 0.0, meta.input.rangeLow, 0.0);
      assertEquals(name, rawPixels ? 255.0 : 1.0, meta.input.rangeHigh, 0.0);
      assertEquals(name, expectedCandidates(meta, ((Number) config.get("candidate_blocks")).intValue()), meta.candidates);
    }
  }

  @Test
  public void layerTableAndCostsAgreeWithTheJavaCostModel() throws Exception {
    for (Path model : models()) {
      String name = model.getFileName().toString();
      ModelMetadata meta = ModelMetadata.fromTflite(bytes(model));
      boolean builtIn = !userModel(config(model));
      assertEquals(name, meta.table.size(), meta.layers.size());
      assertEquals(name, "stem", meta.layers.get(0).spec.role);
      int height = meta.input.height;
      int width = meta.input.width;
      int channels = meta.input.channels;
      long maskLength = 0;
      for (int i = 0; i < meta.layers.size(); i++) {
        MetadataLayer layer = meta.layers.get(i);
        LayerSpec spec = layer.spec;
        String where = name + " " + spec.name;
        assertEquals(where, i, spec.index);
        if (builtIn) {  // the built-in layers chain: each consumes the previous layer's output
          assertEquals(where, height, spec.inHeight());
          assertEquals(where, width, spec.inWidth());
          assertEquals(where, channels, spec.inChannels);
        }
        height = spec.outHeight();
        width = spec.outWidth();
        channels = spec.outChannels;
        LayerCost cost = CostModel.layerCost(spec);
        assertEquals(where, cost.params(), layer.params);
        assertEquals(where, cost.forwardMacs, layer.forwardMacs);
        assertEquals(where, meta.candidates.contains(spec.name), layer.candidate);
        if (layer.candidate) {
          assertEquals(where, maskLength, meta.maskOffset(spec.name));
          maskLength += spec.outChannels;
        }
      }
      assertEquals(name, channels, meta.featureDim);
      assertEquals(name, maskLength, meta.maskLength());
    }
  }

  @Test
  public void selftestArraysHaveTheMetadataShapes() throws Exception {
    for (Path model : models()) {
      String name = model.getFileName().toString();
      ByteBuffer file = bytes(model);
      ModelMetadata meta = ModelMetadata.fromTflite(file);
      assertEquals(name, List.of(ModelMetadata.METADATA_NAME, Contract.CHECKSUM_NAME, SELFTEST_NAME),
          TfliteMetadataReader.names(file).stream().filter(n -> n.startsWith("tflite_train")).sorted().toList());
      Map<String, long[]> shapes = npzShapes(TfliteMetadataReader.read(file, SELFTEST_NAME));
      // format 2: the images are regenerated from a seed; image_shape holds (N, H, W, C)
      long batch = shapes.get("infer/embeddings.npy")[0];
      assertEquals(name, List.of(4L), boxed(shapes.get("image_shape.npy")));
      assertEquals(name, List.of((long) meta.maskLength()), boxed(shapes.get("channel_mask.npy")));
      assertEquals(name, List.of(batch, (long) meta.featureDim), boxed(shapes.get("infer/embeddings.npy")));
      Set<String> fisher = new HashSet<>();
      for (String key : shapes.keySet()) {
        if (key.startsWith("fisher/")) {
          fisher.add(key.substring("fisher/".length(), key.length() - ".npy".length()));
        }
      }
      assertEquals(name, new HashSet<>(meta.candidates), fisher);
      for (String layer : meta.candidates) {
        assertEquals(name + " fisher/" + layer, List.of((long) meta.candidate(layer).outChannels),
            boxed(shapes.get("fisher/" + layer + ".npy")));
      }
    }
  }

  private static List<Long> boxed(long[] values) {
    assertFalse("array missing from the self-test archive", values == null);
    List<Long> out = new ArrayList<>();
    for (long v : values) {
      out.add(v);
    }
    return out;
  }

  /** Entry name -> shape of every {@code .npy} array in an npz (zip) archive, from the npy headers. */
  static Map<String, long[]> npzShapes(byte[] npz) throws IOException {
    Map<String, long[]> out = new HashMap<>();
    try (ZipInputStream zip = new ZipInputStream(new ByteArrayInputStream(npz))) {
      for (ZipEntry entry = zip.getNextEntry(); entry != null; entry = zip.getNextEntry()) {
        out.put(entry.getName(), npyShape(entry.getName(), zip.readAllBytes()));
      }
    }
    assertFalse("the self-test archive holds no arrays", out.isEmpty());
    return out;
  }

  /** npy format: magic "\x93NUMPY", major, minor, header length (u16 for v1, u32 for v2/3), a Python dict literal. */
  private static long[] npyShape(String entry, byte[] npy) {
    ByteBuffer buf = ByteBuffer.wrap(npy).order(ByteOrder.LITTLE_ENDIAN);
    assertTrue(entry + ": not an npy array", npy.length > 10 && (npy[0] & 0xFF) == 0x93
        && new String(npy, 1, 5, StandardCharsets.ISO_8859_1).equals("NUMPY"));
    int major = npy[6];
    int length = major == 1 ? buf.getShort(8) & 0xFFFF : buf.getInt(8);
    int start = major == 1 ? 10 : 12;
    String header = new String(npy, start, length, StandardCharsets.ISO_8859_1);
    Matcher m = SHAPE.matcher(header);
    assertTrue(entry + ": npy header without a shape: " + header, m.find());
    List<Long> dims = new ArrayList<>();
    for (String dim : m.group(1).split(",")) {
      if (!dim.isBlank()) {
        dims.add(Long.parseLong(dim.trim()));
      }
    }
    return dims.stream().mapToLong(Long::longValue).toArray();
  }
}
