package org.tflitetrain.core.cost;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** The ordered convolutions of a backbone; mirrors {@code tflite_train.sparse.layer_table.LayerTable}. */
public final class LayerTable {
  private final List<LayerSpec> layers;
  private final Map<String, Integer> byName = new HashMap<>();

  /**
   * @throws IllegalArgumentException when empty, indices are not 0..n-1 in order or names repeat
   */
  public LayerTable(List<LayerSpec> layers) {
    if (layers == null || layers.isEmpty()) {
      throw new IllegalArgumentException("layers must not be empty");
    }
    for (int position = 0; position < layers.size(); position++) {
      LayerSpec layer = layers.get(position);
      if (layer.index != position) {
        throw new IllegalArgumentException("layers[" + position + "] has index " + layer.index
            + "; indices must be 0..n-1 in order");
      }
      if (byName.put(layer.name, position) != null) {
        throw new IllegalArgumentException("duplicate layer name " + layer.name);
      }
    }
    this.layers = Collections.unmodifiableList(new ArrayList<>(layers));
  }

  public int size() {
    return layers.size();
  }

  public LayerSpec get(int index) {
    return layers.get(indexOf(index));
  }

  public LayerSpec get(String name) {
    return layers.get(indexOf(name));
  }

  public List<LayerSpec> layers() {
    return layers;
  }

  /** Index of a layer name. @throws IllegalArgumentException for an unknown name */
  public int indexOf(String name) {
    Integer index = byName.get(name);
    if (index == null) {
      throw new IllegalArgumentException("layer " + name + " does not exist; known layers: " + byName.keySet());
    }
    return index;
  }

  /** Checks an index. @throws IllegalArgumentException when out of range */
  public int indexOf(int index) {
    if (index < 0 || index >= layers.size()) {
      throw new IllegalArgumentException("layer index " + index + " out of range 0.." + (layers.size() - 1));
    }
    return index;
  }

  /** Number of inverted-residual blocks (stem and final conv excluded). */
  public int numBlocks() {
    return (int) layers.stream()
        .filter(l -> l.role.equals("expand") || l.role.equals("depthwise") || l.role.equals("project"))
        .mapToInt(l -> l.block).distinct().count();
  }

  /** Indices of the layers in the last {@code k} blocks plus the final conv (Python {@code last_blocks}). */
  public List<Integer> lastBlocks(int k) {
    int blocks = numBlocks();
    if (k < 1 || k > blocks) {
      throw new IllegalArgumentException("k must be an int in 1.." + blocks + "; got " + k);
    }
    List<Integer> out = new ArrayList<>();
    for (LayerSpec layer : layers) {
      if (layer.block >= blocks - k) {
        out.add(layer.index);
      }
    }
    return out;
  }
}
