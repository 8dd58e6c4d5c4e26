package org.tflitetrain.core.adapt;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.tflitetrain.core.model.CachedCut;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.GraphSignature;
import org.tflitetrain.core.model.ModelMetadata;

/**
 * A test {@link SignatureRunner} with the preconditions of TFLite's Java {@code Interpreter.runSignature}:
 * a null or empty input map is refused with the real API's message ("Input error: Inputs should not be null
 * or empty."), an unknown signature or input name, a wrong dtype or a fixed dimension of the wrong size is
 * an {@link IllegalArgumentException}, and each declared output must come back with its dtype and fixed
 * dimensions. Stricter than the real API in one way: every declared input must be given (the real one
 * would run on a stale tensor). The checked call is executed by {@code backend} (a fake or the bridge).
 */
final class ContractRunner implements SignatureRunner {
  final Map<String, GraphSignature> signatures;
  final SignatureRunner backend;
  final List<String> calls = new ArrayList<>();
  final List<Map<String, Tensor>> inputs = new ArrayList<>();

  ContractRunner(Map<String, GraphSignature> signatures, SignatureRunner backend) {
    this.signatures = signatures;
    this.backend = backend;
  }

  @Override
  public Map<String, Tensor> run(String signature, Map<String, Tensor> in) throws Exception {
    if (in == null || in.isEmpty()) {
      throw new IllegalArgumentException("Input error: Inputs should not be null or empty.");
    }
    GraphSignature sig = signatures.get(signature);
    if (sig == null) {
      throw new IllegalArgumentException("Input error: Signature " + signature + " not found; the model has "
          + signatures.keySet());
    }
    if (!in.keySet().equals(sig.inputs.keySet())) {
      throw new IllegalArgumentException("Input error: signature " + signature + " takes inputs "
          + new TreeSet<>(sig.inputs.keySet()) + "; got " + new TreeSet<>(in.keySet()));
    }
    for (Map.Entry<String, Tensor> entry : in.entrySet()) {
      check(signature, "input", entry.getKey(), sig.inputs.get(entry.getKey()), entry.getValue(), true);
    }
    calls.add(signature);
    inputs.add(in);
    Map<String, Tensor> out = backend.run(signature, in);
    for (Map.Entry<String, GraphSignature.TensorInfo> entry : sig.outputs.entrySet()) {
      Tensor tensor = out.get(entry.getKey());
      if (tensor == null) {
        throw new IllegalStateException("signature " + signature + " returned no output " + entry.getKey());
      }
      check(signature, "output", entry.getKey(), entry.getValue(), tensor, false);
    }
    return out;
  }

  private static void check(String signature, String kind, String name, GraphSignature.TensorInfo spec, Tensor tensor,
      boolean input) {
    String dtype = dtypeName(tensor.dtype);
    int[] shape = spec.shape();
    boolean ok = dtype.equals(spec.dtype);
    if (ok && shape != null) {
      int[] actual = tensor.shape();
      ok = actual.length == shape.length;
      for (int i = 0; ok && i < shape.length; i++) {
        ok = shape[i] < 0 ? actual[i] >= 1 : actual[i] == shape[i];
      }
    }
    if (!ok) {
      String message = (input ? "Input error: " : "") + signature + " " + kind + " " + name + " must be " + spec
          + "; got " + dtype + Arrays.toString(tensor.shape());
      throw input ? new IllegalArgumentException(message) : new IllegalStateException(message);
    }
  }

  static String dtypeName(Tensor.DType dtype) {
    switch (dtype) {
      case FLOAT32: return "float32";
      case INT32: return "int32";
      default: return "int64";
    }
  }

  /**
   * The signatures the contract implies for {@code m} (the golden metadata has no graph): the metadata's
   * input and output names with the contract's dtypes and shapes; state tensors of any shape; the
   * activations of a cached cut's signatures f32[-1, shape...].
   */
  static Map<String, GraphSignature> fromMetadata(ModelMetadata m) {
    Map<String, GraphSignature.TensorInfo> known = new LinkedHashMap<>();
    known.put(Contract.IMAGES, f32(-1, m.input.height, m.input.width, m.input.channels));
    known.put(Contract.LABELS, i32(-1));
    known.put(Contract.PROTOTYPES, f32(m.classCapacity, m.featureDim));
    known.put(Contract.NUM_CLASSES, i32());
    known.put(Contract.CHANNEL_MASK, f32(m.maskLength()));
    known.put(Contract.LEARNING_RATE, f32());
    known.put(Contract.DUMMY, i32());
    known.put(Contract.EMBEDDINGS, f32(-1, m.featureDim));
    known.put(Contract.LOGITS, f32(-1, m.classCapacity));
    known.put(Contract.LOSS, f32());
    known.put(Contract.ACCURACY, f32());
    known.put(Contract.OK, i32());
    for (String layer : m.candidates) {
      known.put(layer, f32(m.candidate(layer).outChannels));
    }
    Map<String, Map<String, GraphSignature.TensorInfo>> perSignature = new LinkedHashMap<>();
    for (CachedCut cut : m.cachedCuts) {
      int[] shape = cut.shape();
      int[] batched = new int[shape.length + 1];
      batched[0] = -1;
      System.arraycopy(shape, 0, batched, 1, shape.length);
      Map<String, GraphSignature.TensorInfo> withActivations = new LinkedHashMap<>(known);
      withActivations.put(Contract.ACTIVATIONS, f32(batched));
      for (String name : List.of(cut.featuresSignature, cut.trainSignature, cut.inferSignature)) {
        perSignature.put(name, withActivations);
      }
    }
    Map<?, ?> declared = (Map<?, ?>) m.raw.get(Contract.F_SIGNATURES);
    Map<String, GraphSignature> out = new LinkedHashMap<>();
    for (Map.Entry<?, ?> entry : declared.entrySet()) {
      String name = (String) entry.getKey();
      Map<?, ?> io = (Map<?, ?>) entry.getValue();
      boolean state = name.equals(Contract.GET_STATE) || name.equals(Contract.SET_STATE);
      Map<String, GraphSignature.TensorInfo> shapes = perSignature.getOrDefault(name, known);
      out.put(name, new GraphSignature(name, tensors(io.get(Contract.F_INPUTS), shapes, state),
          tensors(io.get(Contract.F_OUTPUTS), shapes, state)));
    }
    return out;
  }

  private static Map<String, GraphSignature.TensorInfo> tensors(Object names, Map<String, GraphSignature.TensorInfo> known,
      boolean state) {
    Map<String, GraphSignature.TensorInfo> out = new LinkedHashMap<>();
    for (Object item : (List<?>) names) {
      String name = (String) item;
      if (state && !name.equals(Contract.DUMMY) && !name.equals(Contract.OK)) {
        out.put(name, new GraphSignature.TensorInfo(name.equals(Contract.NUM_CLASSES) ? "int32" : "float32", null));
      } else {
        out.put(name, known.get(name));
      }
    }
    return out;
  }

  private static GraphSignature.TensorInfo f32(int... shape) {
    return new GraphSignature.TensorInfo("float32", shape);
  }

  private static GraphSignature.TensorInfo i32(int... shape) {
    return new GraphSignature.TensorInfo("int32", shape);
  }
}
