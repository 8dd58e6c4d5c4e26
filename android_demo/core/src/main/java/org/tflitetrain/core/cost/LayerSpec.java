package org.tflitetrain.core.cost;

import java.util.Arrays;
import java.util.List;
import org.tflitetrain.core.model.Contract;

/**
 * One convolution of a backbone; mirrors {@code tflite_train.sparse.layer_table.LayerSpec}.
 *
 * <p>groups = 1 for a dense conv, = in_channels for a depthwise conv; out_hw = ceil(in_hw / stride)
 * ("same" padding) or floor((in_hw - kernel) / stride) + 1 ("valid"); a Dense layer is a 1x1 conv on
 * a 1x1 map.
 */
public final class LayerSpec {
  /** Allowed roles, as in Python's {@code ROLES}. */
  public static final List<String> ROLES =
      List.of("stem", "expand", "depthwise", "project", "final", "conv", "dense");
  /** Allowed activations, as in Python's {@code ACTIVATIONS}. */
  public static final List<String> ACTIVATIONS =
      List.of("relu6", "linear", "relu", "leaky_relu", "hard_swish", "hard_sigmoid", "swish", "sigmoid");
  /** Activations whose backward needs only a 1-bit mask of the output (Python's {@code MASK_ACTIVATIONS}). */
  public static final List<String> MASK_ACTIVATIONS = List.of("relu", "relu6", "leaky_relu");

  public final int index;
  public final String name;
  public final int block;
  public final String role;
  public final int kernel;
  public final int stride;
  public final int inChannels;
  public final int outChannels;
  public final int groups;
  private final int[] inHw;
  private final int[] outHw;
  public final String activation;

  /**
   * Validates like the Python dataclass.
   *
   * @throws IllegalArgumentException naming the field and the value received
   */
  public LayerSpec(int index, String name, int block, String role, int kernel, int stride,
      int inChannels, int outChannels, int groups, int[] inHw, int[] outHw, String activation) {
    if (name == null || name.isEmpty()) {
      throw new IllegalArgumentException("name must be a non-empty string; got " + name);
    }
    if (!ROLES.contains(role)) {
      throw new IllegalArgumentException("role must be one of " + ROLES + "; got " + role + " for layer " + name);
    }
    if (!ACTIVATIONS.contains(activation)) {
      throw new IllegalArgumentException(
          "activation must be one of " + ACTIVATIONS + "; got " + activation + " for layer " + name);
    }
    requirePositive("kernel", kernel, name);
    requirePositive("stride", stride, name);
    requirePositive("in_channels", inChannels, name);
    requirePositive(Contract.F_OUT_CHANNELS, outChannels, name);
    requirePositive("groups", groups, name);
    if (inChannels % groups != 0 || outChannels % groups != 0) {
      throw new IllegalArgumentException("groups=" + groups + " must divide in_channels=" + inChannels
          + " and out_channels=" + outChannels + " (layer " + name + ")");
    }
    if (inHw == null || inHw.length != 2 || outHw == null || outHw.length != 2) {
      throw new IllegalArgumentException("in_hw and out_hw must be pairs (layer " + name + ")");
    }
    for (int v : new int[] {inHw[0], inHw[1], outHw[0], outHw[1]}) {
      if (v <= 0) {
        throw new IllegalArgumentException("spatial sizes must be positive; got in_hw="
            + Arrays.toString(inHw) + " out_hw=" + Arrays.toString(outHw) + " (layer " + name + ")");
      }
    }
    this.index = index;
    this.name = name;
    this.block = block;
    this.role = role;
    this.kernel = kernel;
    this.stride = stride;
    this.inChannels = inChannels;
    this.outChannels = outChannels;
    this.groups = groups;
    this.inHw = inHw.clone();
    this.outHw = outHw.clone();
    this.activation = activation;
  }

  private static void requirePositive(String field, int value, String name) {
    if (value <= 0) {
      throw new IllegalArgumentException(field + " must be a positive int; got " + value + " for layer " + name);
    }
  }

  public int inHeight() {
    return inHw[0];
  }

  public int inWidth() {
    return inHw[1];
  }

  public int outHeight() {
    return outHw[0];
  }

  public int outWidth() {
    return outHw[1];
  }

  /** True when each output channel sees exactly one input channel. */
  public boolean isDepthwise() {
    return groups > 1 && groups == inChannels && groups == outChannels;
  }

  /** Weights per output channel: k * k * C_in / groups. */
  public long fanIn() {
    return (long) kernel * kernel * (inChannels / groups);
  }

  /**
   * Bits per output element the activation keeps for the backward pass (Python's
   * {@code cost_model.activation_bits}): 0 for linear, 1 for the ReLU family (a mask), 32 otherwise.
   */
  public int activationBits() {
    if ("linear".equals(activation)) {
      return 0;
    }
    return MASK_ACTIVATIONS.contains(activation) ? 1 : 32;
  }

  @Override
  public String toString() {
    return "LayerSpec(" + index + ", " + name + ", " + role + ", k=" + kernel + ", s=" + stride + ", "
        + inChannels + "->" + outChannels + ", g=" + groups + ", " + Arrays.toString(inHw) + "->"
        + Arrays.toString(outHw) + ", " + activation + ")";
  }
}
