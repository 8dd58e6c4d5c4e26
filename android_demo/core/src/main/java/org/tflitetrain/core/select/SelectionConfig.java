package org.tflitetrain.core.select;

import java.util.List;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.cost.Optimizer;

/**
 * How to select (port of Python's {@code SelectionConfig}, without the random-channel seed). Immutable;
 * build with {@link #builder()} or derive with the {@code with*} methods. Defaults as in Python: TinyTrain,
 * unlimited budget, channel ratio 0.25, criterion tinytrain, Fisher channels, Adam, batch 1, gradient
 * buffer, on_empty raise.
 */
public final class SelectionConfig {
  public final PolicyKind policy;
  public final Budget budget;
  /** Fraction of output channels per selected layer, in (0, 1]; K = channelCount(C_out, ratio). */
  public final double channelRatio;
  public final Criterion criterion;
  public final ChannelMethod channelMethod;
  public final Optimizer optimizer;
  public final int batchSize;
  public final boolean gradientBuffer;
  public final OnEmpty onEmpty;
  /** Fixed layer priority list for SparseUpdate, or null. */
  public final List<String> layers;

  private SelectionConfig(Builder b) {
    if (b.policy == null || b.budget == null || b.criterion == null || b.channelMethod == null
        || b.optimizer == null || b.onEmpty == null) {
      throw new IllegalArgumentException("selection config fields must not be null");
    }
    CostModel.channelCount(1, b.channelRatio); // validates the ratio
    if (b.batchSize < 1) {
      throw new IllegalArgumentException("batchSize must be an int >= 1; got " + b.batchSize);
    }
    if (b.layers != null && b.layers.isEmpty()) {
      throw new IllegalArgumentException("layers must be a non-empty list of layer names or null; got []");
    }
    policy = b.policy;
    budget = b.budget;
    channelRatio = b.channelRatio;
    criterion = b.criterion;
    channelMethod = b.channelMethod;
    optimizer = b.optimizer;
    batchSize = b.batchSize;
    gradientBuffer = b.gradientBuffer;
    onEmpty = b.onEmpty;
    layers = b.layers == null ? null : List.copyOf(b.layers);
  }

  public static Builder builder() {
    return new Builder();
  }

  /** A builder holding this config's values. */
  public Builder toBuilder() {
    Builder b = new Builder();
    b.policy = policy;
    b.budget = budget;
    b.channelRatio = channelRatio;
    b.criterion = criterion;
    b.channelMethod = channelMethod;
    b.optimizer = optimizer;
    b.batchSize = batchSize;
    b.gradientBuffer = gradientBuffer;
    b.onEmpty = onEmpty;
    b.layers = layers;
    return b;
  }

  @Override
  public String toString() {
    return "SelectionConfig(" + policy.wireName + ", " + budget + ", ratio=" + channelRatio + ", "
        + criterion.wireName + ", " + channelMethod.wireName + ", " + optimizer.wireName + ", batch=" + batchSize
        + ", on_empty=" + onEmpty.wireName + (layers == null ? "" : ", layers=" + layers) + ")";
  }

  /** Mutable builder. */
  public static final class Builder {
    private PolicyKind policy = PolicyKind.TINYTRAIN;
    private Budget budget = Budget.unlimited();
    private double channelRatio = 0.25;
    private Criterion criterion = Criterion.TINYTRAIN;
    private ChannelMethod channelMethod = ChannelMethod.FISHER;
    private Optimizer optimizer = Optimizer.ADAM;
    private int batchSize = 1;
    private boolean gradientBuffer = true;
    private OnEmpty onEmpty = OnEmpty.RAISE;
    private List<String> layers;

    public Builder policy(PolicyKind value) {
      policy = value;
      return this;
    }

    public Builder budget(Budget value) {
      budget = value;
      return this;
    }

    public Builder channelRatio(double value) {
      channelRatio = value;
      return this;
    }

    public Builder criterion(Criterion value) {
      criterion = value;
      return this;
    }

    public Builder channelMethod(ChannelMethod value) {
      channelMethod = value;
      return this;
    }

    public Builder optimizer(Optimizer value) {
      optimizer = value;
      return this;
    }

    public Builder batchSize(int value) {
      batchSize = value;
      return this;
    }

    public Builder gradientBuffer(boolean value) {
      gradientBuffer = value;
      return this;
    }

    public Builder onEmpty(OnEmpty value) {
      onEmpty = value;
      return this;
    }

    public Builder layers(List<String> value) {
      layers = value;
      return this;
    }

    public SelectionConfig build() {
      return new SelectionConfig(this);
    }
  }
}
