package org.tflitetrain.demo;

import java.util.ArrayList;
import java.util.List;
import org.tflitetrain.core.adapt.Tensor;
import org.tflitetrain.core.model.InputSpec;

/** Preprocessed photos with their class labels (the few-shot support set). */
final class SupportSet {
  private final InputSpec spec;
  private final List<float[]> images = new ArrayList<>();
  private final List<Integer> labels = new ArrayList<>();

  SupportSet(InputSpec spec) {
    this.spec = spec;
  }

  void add(float[] image, int label) {
    if (image.length != spec.elementsPerImage()) {
      throw new IllegalArgumentException("image must have " + spec.elementsPerImage() + " values; got " + image.length);
    }
    images.add(image);
    labels.add(label);
  }

  void clear() {
    images.clear();
    labels.clear();
  }

  int size() {
    return images.size();
  }

  int count(int label) {
    int n = 0;
    for (int l : labels) {
      if (l == label) {
        n++;
      }
    }
    return n;
  }

  /** Classes 0..k-1 that all have photos, where k = highest labelled class + 1. */
  int numClasses() {
    int max = -1;
    for (int l : labels) {
      max = Math.max(max, l);
    }
    return max + 1;
  }

  Tensor images() {
    int per = spec.elementsPerImage();
    float[] data = new float[images.size() * per];
    for (int i = 0; i < images.size(); i++) {
      System.arraycopy(images.get(i), 0, data, i * per, per);
    }
    return Tensor.ofFloats(new int[] {images.size(), spec.height, spec.width, spec.channels}, data);
  }

  int[] labels() {
    int[] out = new int[labels.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = labels.get(i);
    }
    return out;
  }
}
