package org.tflitetrain.demo;

import android.content.ContentResolver;
import android.graphics.Bitmap;
import android.graphics.ImageDecoder;
import android.net.Uri;
import java.io.IOException;
import org.tflitetrain.core.image.ImagePreprocessor;
import org.tflitetrain.core.model.InputSpec;

/** Decodes photos into software ARGB bitmaps and then into the model's input values. */
final class BitmapInput {
  /** Longest side photos are decoded to; the model inputs are far smaller, this only bounds memory. */
  private static final int MAX_SIDE = 512;

  private BitmapInput() {}

  static Bitmap decode(ContentResolver resolver, Uri uri) throws IOException {
    ImageDecoder.Source source = ImageDecoder.createSource(resolver, uri);
    return ImageDecoder.decodeBitmap(source, (decoder, info, src) -> {
      decoder.setAllocator(ImageDecoder.ALLOCATOR_SOFTWARE);
      int w = info.getSize().getWidth();
      int h = info.getSize().getHeight();
      int longest = Math.max(w, h);
      if (longest > MAX_SIDE) {
        decoder.setTargetSize(Math.max(1, w * MAX_SIDE / longest), Math.max(1, h * MAX_SIDE / longest));
      }
    });
  }

  static float[] toInput(Bitmap bitmap, InputSpec spec) {
    Bitmap argb = bitmap.getConfig() == Bitmap.Config.ARGB_8888 ? bitmap : bitmap.copy(Bitmap.Config.ARGB_8888, false);
    int w = argb.getWidth();
    int h = argb.getHeight();
    int[] pixels = new int[w * h];
    argb.getPixels(pixels, 0, w, 0, 0, w, h);
    return ImagePreprocessor.toInput(pixels, w, h, spec);
  }
}
