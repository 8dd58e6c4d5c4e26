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
  /**
   * Channel order the network reads ({@link Contract#CHANNEL_ORDER_RGB} or {@link Contract#CHANNEL_ORDER_BGR}):
   * informational, the graph reverses the channels itself; images are always fed RGB.
   */
  public final String channelOrder;

  InputSpec(int height, int width, int channels, String dtype, double rangeLow, double rangeHigh,
      List<Double> mean, List<Double> std, String channelOrder) {
    this.height = height;
    this.width = width;
    this.channels = channels;
    this.dtype = dtype;
    this.rangeLow = rangeLow;
    this.rangeHigh = rangeHigh;
    this.mean = List.copyOf(mean);
    this.std = List.copyOf(std);
    this.channelOrder = channelOrder;
  }

  /** Elements of one image: H * W * C. */
  public int elementsPerImage() {
    return height * width * channels;
  }
}
