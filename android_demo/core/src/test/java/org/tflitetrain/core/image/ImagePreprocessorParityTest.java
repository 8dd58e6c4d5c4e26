package org.tflitetrain.core.image;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.awt.image.BufferedImage;
import java.io.InputStream;
import java.util.List;
import java.util.Map;
import javax.imageio.ImageIO;
import org.junit.Test;
import org.tflitetrain.core.Resources;
import org.tflitetrain.core.json.Json;

/**
 * The same files give the same model inputs as Python: the committed PNGs in {@code /image/} are
 * decoded here with {@code javax.imageio} (in the app: {@code BitmapFactory}), preprocessed by
 * {@link ImagePreprocessor}, and compared with {@code image_golden.json}, written by Python's
 * {@code to_model_input} after Pillow decoded the same files
 * ({@code python -m tools.golden.image_vectors}).
 */
public class ImagePreprocessorParityTest {
  /** Both sides compute in double and round once to float32: any difference is at most one float32 ulp. */
  static final double TOLERANCE = 1e-6;

  static int[] argb(String file, int[] size) throws Exception {
    try (InputStream in = ImagePreprocessorParityTest.class.getResourceAsStream("/image/" + file)) {
      BufferedImage image = ImageIO.read(in);
      size[0] = image.getWidth();
      size[1] = image.getHeight();
      if (image.getType() == BufferedImage.TYPE_BYTE_GRAY) {
        // getRGB would apply a linear-grey -> sRGB conversion; a grey PNG's sample g is the pixel
        // (g, g, g), as Pillow and Android's BitmapFactory read it.
        int[] grey = image.getRaster().getPixels(0, 0, size[0], size[1], (int[]) null);
        int[] out = new int[grey.length];
        for (int i = 0; i < grey.length; i++) {
          out[i] = 0xFF000000 | grey[i] << 16 | grey[i] << 8 | grey[i];
        }
        return out;
      }
      return image.getRGB(0, 0, size[0], size[1], null, 0, size[0]);
    }
  }

  @Test
  public void matchesPythonOnTheSameFiles() throws Exception {
    Map<String, Object> doc = Resources.obj(Json.parse(Resources.text("/image/image_golden.json")));
    List<Object> cases = Resources.list(doc.get("cases"));
    assertTrue(cases.size() >= 9);
    double worst = 0;
    for (Object item : cases) {
      Map<String, Object> c = Resources.obj(item);
      String file = (String) c.get("file");
      List<Object> shape = Resources.list(c.get("shape"));
      List<Object> range = Resources.list(c.get("range"));
      List<Object> expected = Resources.list(c.get("values"));
      int[] size = new int[2];
      int[] pixels = argb(file, size);
      float[] actual = ImagePreprocessor.toInput(pixels, size[0], size[1], ((Number) shape.get(0)).intValue(),
          ((Number) shape.get(1)).intValue(), ((Number) shape.get(2)).intValue(),
          ((Number) range.get(0)).doubleValue(), ((Number) range.get(1)).doubleValue());
      assertEquals(file + " " + shape, expected.size(), actual.length);
      for (int i = 0; i < actual.length; i++) {
        double diff = Math.abs(actual[i] - (float) ((Number) expected.get(i)).doubleValue());
        worst = Math.max(worst, diff);
        assertEquals(file + " " + shape + " value " + i, ((Number) expected.get(i)).doubleValue(), actual[i], TOLERANCE);
      }
    }
    System.out.println("ImagePreprocessorParityTest: " + cases.size() + " cases, max |Java - Python| = " + worst);
  }
}
