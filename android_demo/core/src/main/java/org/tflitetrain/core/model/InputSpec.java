package org.tflitetrain.core.model;

import java.util.List;

/** The {@code input} entry: image size, dtype and the value range images are given in. */
public final class InputSpec {
  public final int height;
  public final int width;
  public final int channels;
  public final String dtype;
  public final double rangeLow;
  public final double rangeHigh;
  /** Per-channel normalisation, applied in-graph (informational here). */
  public final List<Double> mean;
  public final List<Double> std;

  InputSpec(int height, int width, int channels, String dtype, double rangeLow, double rangeHigh,
      List<Double> mean, List<Double> std) {
    this.height = height;
    this.width = width;
    this.channels = channels;
    this.dtype = dtype;
    this.rangeLow = rangeLow;
    this.rangeHigh = rangeHigh;
    this.mean = List.copyOf(mean);
    this.std = List.copyOf(std);
  }

  /** Elements of one image: H * W * C. */
  public int elementsPerImage() {
    return height * width * channels;
  }
}
