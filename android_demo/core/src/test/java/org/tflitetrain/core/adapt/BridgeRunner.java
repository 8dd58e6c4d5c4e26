package org.tflitetrain.core.adapt;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Assume;
import org.tflitetrain.core.json.Json;

/**
 * Executes signature calls on a real {@code .tflite} file in a Python subprocess
 * ({@code src/test/python/signature_bridge.py}; u32 big-endian length-prefixed JSON, tensors as base64
 * little-endian bytes). The Python executable comes from the system property {@value #PYTHON} (set by
 * {@code make test-java} to the main venv); unset, the tests that need it are skipped.
 */
final class BridgeRunner implements SignatureRunner, AutoCloseable {
  static final String PYTHON = "tflitetrain.python";
  static final String SCRIPT = "android_demo/core/src/test/python/signature_bridge.py";
  private final Process process;
  private final DataOutputStream out;
  private final DataInputStream in;

  BridgeRunner(Path model) throws IOException {
    String python = System.getProperty(PYTHON);
    Assume.assumeTrue("system property " + PYTHON + " not set: bridge tests skipped", python != null);
    ProcessBuilder builder = new ProcessBuilder(python, SCRIPT, model.toString());
    builder.redirectError(ProcessBuilder.Redirect.INHERIT);
    builder.environment().put("TF_CPP_MIN_LOG_LEVEL", "2");
    if (!new File(SCRIPT).isFile()) {
      throw new IOException(SCRIPT + " not found: run the JVM tests from the repository root (make test-java)");
    }
    process = builder.start();
    out = new DataOutputStream(process.getOutputStream());
    in = new DataInputStream(process.getInputStream());
  }

  /** The exported test model {@code name} (system property {@code tflitetrain.fixtures}; unset: the test is skipped). */
  static Path fixture(String name) {
    String dir = System.getProperty("tflitetrain.fixtures");
    Assume.assumeTrue("system property tflitetrain.fixtures not set", dir != null);
    return Path.of(dir, name + ".tflite");
  }

  @Override
  public Map<String, Tensor> run(String signature, Map<String, Tensor> inputs) throws IOException {
    StringBuilder request = new StringBuilder("{\"op\": \"run\", \"signature\": ").append(quote(signature))
        .append(", \"inputs\": ").append(tensors(inputs)).append('}');
    return tensorsOf(call(request.toString()).get("outputs"));
  }

  /** Sends one JSON request, returns the parsed reply; an error reply is an IOException. */
  Map<String, Object> call(String json) throws IOException {
    byte[] data = json.getBytes(StandardCharsets.UTF_8);
    out.writeInt(data.length);
    out.write(data);
    out.flush();
    int length = in.readInt();
    byte[] reply = in.readNBytes(length);
    @SuppressWarnings("unchecked")
    Map<String, Object> parsed = (Map<String, Object>) Json.parse(new String(reply, StandardCharsets.UTF_8));
    if (parsed.containsKey("error")) {
      throw new IOException("python bridge: " + parsed.get("error"));
    }
    return parsed;
  }

  static String quote(String s) {
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }

  static String tensors(Map<String, Tensor> tensors) {
    StringBuilder b = new StringBuilder("{");
    for (Map.Entry<String, Tensor> entry : tensors.entrySet()) {
      if (b.length() > 1) {
        b.append(", ");
      }
      b.append(quote(entry.getKey())).append(": ").append(tensor(entry.getValue()));
    }
    return b.append('}').toString();
  }

  static String tensor(Tensor t) {
    int[] shape = t.shape();
    ByteBuffer bytes = ByteBuffer.allocate(t.size() * (t.dtype == Tensor.DType.INT64 ? 8 : 4))
        .order(ByteOrder.LITTLE_ENDIAN);
    switch (t.dtype) {
      case FLOAT32: bytes.asFloatBuffer().put(t.floats()); break;
      case INT32: bytes.asIntBuffer().put(t.ints()); break;
      default: bytes.asLongBuffer().put(t.longs()); break;
    }
    StringBuilder dims = new StringBuilder("[");
    for (int i = 0; i < shape.length; i++) {
      dims.append(i > 0 ? ", " : "").append(shape[i]);
    }
    return "{\"dtype\": " + quote(ContractRunner.dtypeName(t.dtype)) + ", \"shape\": " + dims + "], \"data\": "
        + quote(Base64.getEncoder().encodeToString(bytes.array())) + "}";
  }

  static Map<String, Tensor> tensorsOf(Object json) {
    Map<String, Tensor> out = new LinkedHashMap<>();
    for (Map.Entry<?, ?> entry : ((Map<?, ?>) json).entrySet()) {
      out.put((String) entry.getKey(), tensorOf(entry.getValue()));
    }
    return out;
  }

  static Tensor tensorOf(Object json) {
    Map<?, ?> map = (Map<?, ?>) json;
    List<?> dims = (List<?>) map.get("shape");
    int[] shape = new int[dims.size()];
    for (int i = 0; i < shape.length; i++) {
      shape[i] = ((Number) dims.get(i)).intValue();
    }
    ByteBuffer bytes = ByteBuffer.wrap(Base64.getDecoder().decode((String) map.get("data"))).order(ByteOrder.LITTLE_ENDIAN);
    switch ((String) map.get("dtype")) {
      case "float32": {
        float[] data = new float[bytes.remaining() / 4];
        bytes.asFloatBuffer().get(data);
        return Tensor.ofFloats(shape, data);
      }
      case "int32": {
        int[] data = new int[bytes.remaining() / 4];
        bytes.asIntBuffer().get(data);
        return Tensor.ofInts(shape, data);
      }
      default: {
        long[] data = new long[bytes.remaining() / 8];
        bytes.asLongBuffer().get(data);
        return Tensor.ofLongs(shape, data);
      }
    }
  }

  @Override
  public void close() throws IOException {
    out.close();
    try {
      process.waitFor();
    } catch (InterruptedException err) {
      Thread.currentThread().interrupt();
      process.destroy();
    }
  }
}
