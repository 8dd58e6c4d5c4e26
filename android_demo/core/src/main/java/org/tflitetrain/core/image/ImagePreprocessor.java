package org.tflitetrain.core.image;

import org.tflitetrain.core.model.InputSpec;

/**
 * Turns ARGB pixels (as Android's {@code Bitmap.getPixels} gives them: not premultiplied) into the
 * model's input, with the algorithm of the Python {@code tflite_train.runtime.images.model_input.to_model_input}
 * (pinned by {@code image_golden.json}; see {@code ImagePreprocessorParityTest}). In 0..255 units:
 *
 * <ol>
 *   <li>alpha composited on white, per source pixel: c' = c * a / 255 + (255 - a);
 *   <li>centre crop to the input aspect ratio r = w / h (a window of fractional size): if W / H &gt; r
 *       the window is (H r) x H, else W x (W / r), at x0 = (W - cropW) / 2, y0 = (H - cropH) / 2;
 *   <li>bilinear sampling, pixel centres aligned: x_src = x0 + (x + 0.5) cropW / w - 0.5 (same in y),
 *       clamped to [0, W - 1]; the 4 neighbours floor(x_src) and min(floor + 1, W - 1);
 *   <li>c = 3: v = low + (high - low) / 255 * rgb; c = 1: the BT.601 luma 0.299 R + 0.587 G + 0.114 B
 *       instead of rgb, in the metadata's {@code input.range} [low, high].
 * </ol>
 *
 * <p>All in double, cast to float at the end. Decoding (and EXIF rotation) is the caller's job:
 * Android's {@code BitmapFactory} / {@code ImageDecoder}. Normalisation by mean/std happens inside the graph.
 */
public final class ImagePreprocessor {
  private ImagePreprocessor() {}

  /**
   * @param argb row-major pixels, 0xAARRGGBB (not premultiplied)
   * @return f32 values of one image, H x W x C row-major (the NHWC layout minus N)
   */
  public static float[] toInput(int[] argb, int width, int height, InputSpec spec) {
    return toInput(argb, width, height, spec.height, spec.width, spec.channels, spec.rangeLow, spec.rangeHigh);
  }

  /**
   * The same for an explicit input shape and value range.
   *
   * @param outHeight model input height h
   * @param outWidth model input width w
   * @param channels model input channels c, 1 or 3
   * @param low lower end of the input range
   * @param high upper end of the input range
   */
  public static float[] toInput(int[] argb, int width, int height, int outHeight, int outWidth, int channels,
      double low, double high) {
    if (width < 1 || height < 1 || argb.length != width * height) {
      throw new IllegalArgumentException("argb must hold width*height pixels; got " + argb.length + " for "
          + width + "x" + height);
    }
    if (channels != 1 && channels != 3) {
      throw new IllegalArgumentException("only 1- or 3-channel inputs are supported; got " + channels);
    }
    if (outHeight < 1 || outWidth < 1) {
      throw new IllegalArgumentException("input size must be positive; got " + outHeight + "x" + outWidth);
    }
    double targetAspect = (double) outWidth / outHeight;
    double cropW = width;
    double cropH = height;
    if ((double) width / height > targetAspect) {
      cropW = height * targetAspect;
    } else {
      cropH = width / targetAspect;
    }
    double x0 = (width - cropW) / 2;
    double y0 = (height - cropH) / 2;
    double scale = (high - low) / 255.0;
    float[] out = new float[outHeight * outWidth * channels];
    double[] rgb = new double[3];
    for (int y = 0; y < outHeight; y++) {
      double sy = y0 + (y + 0.5) * cropH / outHeight - 0.5;
      for (int x = 0; x < outWidth; x++) {
        double sx = x0 + (x + 0.5) * cropW / outWidth - 0.5;
        bilinear(argb, width, height, sx, sy, rgb);
        int base = (y * outWidth + x) * channels;
        if (channels == 3) {
          for (int c = 0; c < 3; c++) {
            out[base + c] = (float) (low + scale * rgb[c]);
          }
        } else {
          out[base] = (float) (low + scale * (0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]));
        }
      }
    }
    return out;
  }

  private static void bilinear(int[] argb, int width, int height, double x, double y, double[] out) {
    x = Math.max(0, Math.min(width - 1, x));
    y = Math.max(0, Math.min(height - 1, y));
    int x0 = (int) Math.floor(x);
    int y0 = (int) Math.floor(y);
    int x1 = Math.min(width - 1, x0 + 1);
    int y1 = Math.min(height - 1, y0 + 1);
    double fx = x - x0;
    double fy = y - y0;
    for (int c = 0; c < 3; c++) {
      double top = (1 - fx) * onWhite(argb[y0 * width + x0], c) + fx * onWhite(argb[y0 * width + x1], c);
      double bottom = (1 - fx) * onWhite(argb[y1 * width + x0], c) + fx * onWhite(argb[y1 * width + x1], c);
      out[c] = (1 - fy) * top + fy * bottom;
    }
  }

  /** Channel c (0 = R, 1 = G, 2 = B) of a pixel composited on white: c * a / 255 + (255 - a). */
  private static double onWhite(int pixel, int c) {
    double value = (pixel >> (16 - 8 * c)) & 0xFF;
    double alpha = (pixel >>> 24) & 0xFF;
    return value * alpha / 255.0 + (255.0 - alpha);
  }
}
