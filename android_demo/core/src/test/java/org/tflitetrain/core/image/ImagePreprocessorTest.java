package org.tflitetrain.core.image;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;

import org.junit.Test;
import org.tflitetrain.core.Resources;
import org.tflitetrain.core.model.InputSpec;
import org.tflitetrain.core.model.ModelMetadata;

public class ImagePreprocessorTest {
  static InputSpec spec() throws Exception {
    return ModelMetadata.parse(Resources.text("/golden/metadata_tiny_32.json")).input;
  }

  @Test
  public void constantImageMapsToRange() throws Exception {
    InputSpec s = spec();
    int[] pixels = new int[50 * 70];
    java.util.Arrays.fill(pixels, 0xFF_FF_80_00);
    float[] out = ImagePreprocessor.toInput(pixels, 50, 70, s);
    assertEquals(s.elementsPerImage(), out.length);
    for (int i = 0; i < out.length; i += 3) {
      assertEquals(1.0f, out[i], 1e-6);
      assertEquals(128 / 255f, out[i + 1], 1e-6);
      assertEquals(0f, out[i + 2], 1e-6);
    }
  }

  @Test
  public void centreCropKeepsTheMiddle() throws Exception {
    InputSpec s = spec();
    // 96 wide x 32 high: left and right thirds white, middle third black -> the square crop is all black.
    int[] pixels = new int[96 * 32];
    for (int y = 0; y < 32; y++) {
      for (int x = 0; x < 96; x++) {
        pixels[y * 96 + x] = (x < 32 || x >= 64) ? 0xFFFFFFFF : 0xFF000000;
      }
    }
    for (float v : ImagePreprocessor.toInput(pixels, 96, 32, s)) {
      assertEquals(0f, v, 1e-6);
    }
  }

  @Test
  public void alphaIsCompositedOnWhite() throws Exception {
    // a = 0 -> white; a = 51 over red (255, 0, 0): R = 255 * 51 / 255 + 204 = 255, G = B = 204
    float[] clear = ImagePreprocessor.toInput(new int[] {0x00_00_00_00}, 1, 1, 1, 1, 3, 0, 1);
    float[] faint = ImagePreprocessor.toInput(new int[] {0x33_FF_00_00}, 1, 1, 1, 1, 3, 0, 1);
    for (int c = 0; c < 3; c++) {
      assertEquals(1f, clear[c], 1e-6);
    }
    assertEquals(1f, faint[0], 1e-6);
    assertEquals(204 / 255f, faint[1], 1e-6);
    assertEquals(204 / 255f, faint[2], 1e-6);
  }

  @Test
  public void rejectsBadPixelCounts() throws Exception {
    InputSpec s = spec();
    assertThrows(IllegalArgumentException.class, () -> ImagePreprocessor.toInput(new int[5], 2, 2, s));
  }
}
