package org.tflitetrain.core.adapt;

import java.util.Arrays;

/**
 * A dense tensor passed to and from a signature: dtype, shape and a flat row-major array
 * ({@code float[]} for FLOAT32, {@code int[]} for INT32, {@code long[]} for INT64).
 */
public final class Tensor {
  /** Element types the exported signatures use. */
  public enum DType { FLOAT32, INT32, INT64 }

  public final DType dtype;
  private final int[] shape;
  private final Object data;

  private Tensor(DType dtype, int[] shape, Object data, int length) {
    long elements = 1;
    for (int d : shape) {
      if (d < 0) {
        throw new IllegalArgumentException("shape must not have negative dimensions; got " + Arrays.toString(shape));
      }
      elements *= d;
    }
    if (elements != length) {
      throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " holds " + elements
          + " elements but the data has " + length);
    }
    this.dtype = dtype;
    this.shape = shape.clone();
    this.data = data;
  }

  public static Tensor ofFloats(int[] shape, float[] data) {
    return new Tensor(DType.FLOAT32, shape, data.clone(), data.length);
  }

  public static Tensor ofInts(int[] shape, int[] data) {
    return new Tensor(DType.INT32, shape, data.clone(), data.length);
  }

  public static Tensor ofLongs(int[] shape, long[] data) {
    return new Tensor(DType.INT64, shape, data.clone(), data.length);
  }

  public static Tensor scalar(float value) {
    return ofFloats(new int[0], new float[] {value});
  }

  public static Tensor scalar(int value) {
    return ofInts(new int[0], new int[] {value});
  }

  public int[] shape() {
    return shape.clone();
  }

  public int rank() {
    return shape.length;
  }

  public int size() {
    switch (dtype) {
      case FLOAT32: return ((float[]) data).length;
      case INT32: return ((int[]) data).length;
      default: return ((long[]) data).length;
    }
  }

  /** A copy of the float data. @throws IllegalStateException unless FLOAT32 */
  public float[] floats() {
    require(DType.FLOAT32);
    return ((float[]) data).clone();
  }

  /** A copy of the int data. @throws IllegalStateException unless INT32 */
  public int[] ints() {
    require(DType.INT32);
    return ((int[]) data).clone();
  }

  /** A copy of the long data. @throws IllegalStateException unless INT64 */
  public long[] longs() {
    require(DType.INT64);
    return ((long[]) data).clone();
  }

  /** The single value of a one-element FLOAT32 tensor. */
  public float floatValue() {
    require(DType.FLOAT32);
    float[] values = (float[]) data;
    if (values.length != 1) {
      throw new IllegalStateException("expected one element; tensor has shape " + Arrays.toString(shape));
    }
    return values[0];
  }

  private void require(DType wanted) {
    if (dtype != wanted) {
      throw new IllegalStateException("tensor is " + dtype + ", not " + wanted);
    }
  }

  @Override
  public boolean equals(Object other) {
    if (!(other instanceof Tensor)) {
      return false;
    }
    Tensor t = (Tensor) other;
    if (dtype != t.dtype || !Arrays.equals(shape, t.shape)) {
      return false;
    }
    switch (dtype) {
      case FLOAT32: return Arrays.equals((float[]) data, (float[]) t.data);
      case INT32: return Arrays.equals((int[]) data, (int[]) t.data);
      default: return Arrays.equals((long[]) data, (long[]) t.data);
    }
  }

  @Override
  public int hashCode() {
    return 31 * dtype.hashCode() + Arrays.hashCode(shape);
  }

  @Override
  public String toString() {
    return "Tensor(" + dtype + ", " + Arrays.toString(shape) + ")";
  }
}
