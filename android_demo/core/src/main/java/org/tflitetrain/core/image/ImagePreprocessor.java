package org.tflitetrain.core.image;

import org.tflitetrain.core.model.InputSpec;

/**
 * Turns ARGB pixels (as Android's {@code Bitmap.getPixels} gives them) into the model's input:
 * centre crop to the input aspect ratio, bilinear resize to H x W (pixel-centre aligned), then
 * v = low + (high - low) * channel / 255 in the metadata's {@code input.range}; one channel uses
 * luminance Y = 0.299 R + 0.587 G + 0.114 B. Normalisation by mean/std happens inside the graph.
 */
public final class ImagePreprocessor {
  private ImagePreprocessor() {}

  /**
   * @param argb row-major pixels, 0xAARRGGBB
   * @return f32 values of one image, H x W x C row-major (the NHWC layout minus N)
   */
  public static float[] toInput(int[] argb, int width, int height, InputSpec spec) {
    if (width < 1 || height < 1 || argb.length != width * height) {
      throw new IllegalArgumentException("argb must hold width*height pixels; got " + argb.length + " for "
          + width + "x" + height);
    }
    if (spec.channels != 1 && spec.channels != 3) {
      throw new IllegalArgumentException("only 1- or 3-channel inputs are supported; got " + spec.channels);
    }
    double targetAspect = (double) spec.width / spec.height;
    double cropW = width;
    double cropH = height;
    if ((double) width / height > targetAspect) {
      cropW = height * targetAspect;
    } else {
      cropH = width / targetAspect;
    }
    double x0 = (width - cropW) / 2;
    double y0 = (height - cropH) / 2;
    double scale = (spec.rangeHigh - spec.rangeLow) / 255.0;
    float[] out = new float[spec.height * spec.width * spec.channels];
    for (int y = 0; y < spec.height; y++) {
      double sy = y0 + (y + 0.5) * cropH / spec.height - 0.5;
      for (int x = 0; x < spec.width; x++) {
        double sx = x0 + (x + 0.5) * cropW / spec.width - 0.5;
        double[] rgb = bilinear(argb, width, height, sx, sy);
        int base = (y * spec.width + x) * spec.channels;
        if (spec.channels == 3) {
          for (int c = 0; c < 3; c++) {
            out[base + c] = (float) (spec.rangeLow + scale * rgb[c]);
          }
        } else {
          out[base] = (float) (spec.rangeLow + scale * (0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]));
        }
      }
    }
    return out;
  }

  private static double[] bilinear(int[] argb, int width, int height, double x, double y) {
    x = Math.max(0, Math.min(width - 1, x));
    y = Math.max(0, Math.min(height - 1, y));
    int x0 = (int) Math.floor(x);
    int y0 = (int) Math.floor(y);
    int x1 = Math.min(width - 1, x0 + 1);
    int y1 = Math.min(height - 1, y0 + 1);
    double fx = x - x0;
    double fy = y - y0;
    double[] out = new double[3];
    for (int c = 0; c < 3; c++) {
      int shift = 16 - 8 * c;
      double top = (1 - fx) * channel(argb[y0 * width + x0], shift) + fx * channel(argb[y0 * width + x1], shift);
      double bottom = (1 - fx) * channel(argb[y1 * width + x0], shift) + fx * channel(argb[y1 * width + x1], shift);
      out[c] = (1 - fy) * top + fy * bottom;
    }
    return out;
  }

  private static int channel(int pixel, int shift) {
    return (pixel >> shift) & 0xFF;
  }
}
