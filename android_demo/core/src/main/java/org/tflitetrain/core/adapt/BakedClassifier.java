package org.tflitetrain.core.adapt;

import java.util.Arrays;
import java.util.Map;
import org.tflitetrain.core.model.BakedClassifierMetadata;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.InputSpec;

/**
 * A baked classifier ({@code tflite-train bake}; CONTRACT.md "Baked classifier") on a {@link SignatureRunner}:
 * on Android one wrapping {@code Interpreter.runSignature} on the file's bytes, which
 * {@link BakedClassifierMetadata#load} accepted first. Unlike {@link AdaptationDriver} it needs no state, head or
 * checkpoint: the adapted weights and prototypes are constants of the file.
 */
public final class BakedClassifier {
  public final BakedClassifierMetadata metadata;
  private final SignatureRunner runner;

  public BakedClassifier(BakedClassifierMetadata metadata, SignatureRunner runner) {
    this.metadata = metadata;
    this.runner = runner;
  }

  /**
   * The class scores ({@link Contract#LOGITS}: s cos(e, p_c), softmax = confidences) of FLOAT32 images
   * [N, H, W, C] in the input range, {@code batchSize} images per call.
   *
   * @return [N][classes]
   */
  public float[][] logits(Tensor images, int batchSize) throws Exception {
    InputSpec in = metadata.input;
    int[] shape = images.shape();
    if (images.dtype != Tensor.DType.FLOAT32 || shape.length != 4 || shape[1] != in.height || shape[2] != in.width
        || shape[3] != in.channels) {
      throw new IllegalArgumentException("images must be FLOAT32 [N, " + in.height + ", " + in.width + ", "
          + in.channels + "]; got " + images);
    }
    if (batchSize < 1) {
      throw new IllegalArgumentException("batchSize must be >= 1; got " + batchSize);
    }
    int n = shape[0];
    int per = in.elementsPerImage();
    int classes = metadata.classNames.size();
    float[] data = images.floats();
    float[][] out = new float[n][];
    for (int start = 0; start < n; start += batchSize) {
      int rows = Math.min(batchSize, n - start);
      Tensor batch = Tensor.ofFloats(new int[] {rows, in.height, in.width, in.channels},
          Arrays.copyOfRange(data, start * per, (start + rows) * per));
      Tensor logits = runner.run(Contract.CLASSIFY, Map.of(Contract.IMAGES, batch)).get(Contract.LOGITS);
      if (logits == null || !Arrays.equals(logits.shape(), new int[] {rows, classes})) {
        throw new IllegalStateException("signature " + Contract.CLASSIFY + " returned " + Contract.LOGITS + " "
            + logits + "; expected [" + rows + ", " + classes + "]");
      }
      float[] flat = logits.floats();
      for (int i = 0; i < rows; i++) {
        out[start + i] = Arrays.copyOfRange(flat, i * classes, (i + 1) * classes);
      }
    }
    return out;
  }

  /** The class name of each image's largest score. */
  public String[] classify(Tensor images, int batchSize) throws Exception {
    float[][] logits = logits(images, batchSize);
    String[] out = new String[logits.length];
    for (int i = 0; i < logits.length; i++) {
      out[i] = metadata.classNames.get(AdaptationDriver.argmax(logits[i]));
    }
    return out;
  }
}
