package org.tflitetrain.core.model;

import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One signature as the {@code .tflite} graph declares it ({@code SignatureDef}): input and output
 * tensors by name, each with its dtype and shape signature (-1 = a dimension the caller sizes per call).
 */
public final class GraphSignature {
  /** A tensor of a signature: dtype name ("float32", "int32", "int64", ...) and shape; shape null = any. */
  public static final class TensorInfo {
    public final String dtype;
    private final int[] shape;

    public TensorInfo(String dtype, int[] shape) {
      this.dtype = dtype;
      this.shape = shape == null ? null : shape.clone();
    }

    /** The shape signature (-1 for dynamic dimensions), or null when any shape is accepted. */
    public int[] shape() {
      return shape == null ? null : shape.clone();
    }

    @Override
    public String toString() {
      return dtype + (shape == null ? "[*]" : Arrays.toString(shape));
    }
  }

  public final String name;
  public final Map<String, TensorInfo> inputs;
  public final Map<String, TensorInfo> outputs;

  public GraphSignature(String name, Map<String, TensorInfo> inputs, Map<String, TensorInfo> outputs) {
    this.name = name;
    this.inputs = Collections.unmodifiableMap(new LinkedHashMap<>(inputs));
    this.outputs = Collections.unmodifiableMap(new LinkedHashMap<>(outputs));
  }

  @Override
  public String toString() {
    return name + "(" + inputs + ") -> " + outputs;
  }
}
