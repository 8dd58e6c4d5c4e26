package org.tflitetrain.demo;

import java.lang.reflect.Array;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.tensorflow.lite.DataType;
import org.tensorflow.lite.Interpreter;
import org.tflitetrain.core.adapt.SignatureRunner;
import org.tflitetrain.core.adapt.Tensor;

/**
 * {@link SignatureRunner} over {@link Interpreter#runSignature}. Inputs are passed as Java
 * multi-dimensional arrays (rank 0 as boxed scalars), so the interpreter resizes them to the batch
 * actually given; outputs are read after the call from the signature's output tensors, whatever
 * their (possibly batch-dependent) shape.
 */
final class TfliteSignatureRunner implements SignatureRunner, AutoCloseable {
  private final Interpreter interpreter;

  TfliteSignatureRunner(ByteBuffer model, int threads) {
    Interpreter.Options options = new Interpreter.Options();
    options.setNumThreads(threads);
    interpreter = new Interpreter(model, options);
  }

  /** Signature keys of the model. */
  String[] signatures() {
    return interpreter.getSignatureKeys();
  }

  @Override
  public Map<String, Tensor> run(String signature, Map<String, Tensor> inputs) {
    Map<String, Object> javaInputs = new LinkedHashMap<>();
    for (Map.Entry<String, Tensor> entry : inputs.entrySet()) {
      javaInputs.put(entry.getKey(), toJava(entry.getValue()));
    }
    interpreter.runSignature(javaInputs, Collections.emptyMap(), signature);
    Map<String, Tensor> outputs = new LinkedHashMap<>();
    for (String name : interpreter.getSignatureOutputs(signature)) {
      outputs.put(name, fromTflite(interpreter.getOutputTensorFromSignature(name, signature)));
    }
    return outputs;
  }

  private static Object toJava(Tensor tensor) {
    int[] shape = tensor.shape();
    switch (tensor.dtype) {
      case FLOAT32: {
        float[] data = tensor.floats();
        if (shape.length == 0) {
          return data[0];
        }
        Object array = Array.newInstance(float.class, shape);
        fill(array, data, new int[] {0});
        return array;
      }
      case INT32: {
        int[] data = tensor.ints();
        if (shape.length == 0) {
          return data[0];
        }
        Object array = Array.newInstance(int.class, shape);
        fill(array, data, new int[] {0});
        return array;
      }
      default: {
        long[] data = tensor.longs();
        if (shape.length == 0) {
          return data[0];
        }
        Object array = Array.newInstance(long.class, shape);
        fill(array, data, new int[] {0});
        return array;
      }
    }
  }

  /** Copies the flat row-major {@code data} into the nested array, advancing {@code cursor[0]}. */
  private static void fill(Object array, Object data, int[] cursor) {
    int length = Array.getLength(array);
    Class<?> component = array.getClass().getComponentType();
    if (component.isArray()) {
      for (int i = 0; i < length; i++) {
        fill(Array.get(array, i), data, cursor);
      }
      return;
    }
    System.arraycopy(data, cursor[0], array, 0, length);
    cursor[0] += length;
  }

  private static Tensor fromTflite(org.tensorflow.lite.Tensor tensor) {
    int[] shape = tensor.shape();
    ByteBuffer bytes = tensor.asReadOnlyBuffer().order(ByteOrder.nativeOrder());
    bytes.rewind();
    int elements = tensor.numElements();
    DataType type = tensor.dataType();
    if (type == DataType.FLOAT32) {
      float[] data = new float[elements];
      bytes.asFloatBuffer().get(data);
      return Tensor.ofFloats(shape, data);
    }
    if (type == DataType.INT32) {
      int[] data = new int[elements];
      bytes.asIntBuffer().get(data);
      return Tensor.ofInts(shape, data);
    }
    if (type == DataType.INT64) {
      long[] data = new long[elements];
      bytes.asLongBuffer().get(data);
      return Tensor.ofLongs(shape, data);
    }
    throw new IllegalStateException("output " + tensor.name() + " has unsupported type " + type);
  }

  @Override
  public void close() {
    interpreter.close();
  }
}
