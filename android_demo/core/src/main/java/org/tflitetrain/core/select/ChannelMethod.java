package org.tflitetrain.core.select;

/**
 * How the TinyTrain policy picks output channels inside a selected layer. Python's third ablation,
 * uniformly random channels, draws from numpy's PCG64 and is deliberately not ported.
 */
public enum ChannelMethod {
  /** Top-K by Fisher information Delta_o (TinyTrain's dynamic channel selection). */
  FISHER("fisher"),
  /** Top-K by the L2 norm of each output channel's weights (static ablation). */
  L2("l2");

  public final String wireName;

  ChannelMethod(String wireName) {
    this.wireName = wireName;
  }

  /** @throws IllegalArgumentException for an unknown name (including "random", not ported) */
  public static ChannelMethod fromName(String name) {
    for (ChannelMethod m : values()) {
      if (m.wireName.equals(name)) {
        return m;
      }
    }
    throw new IllegalArgumentException("channel method must be one of fisher, l2 (random is not ported); got " + name);
  }
}
