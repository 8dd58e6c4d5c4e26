package org.tflitetrain.core.cost;

/** Static costs of one layer (per sample); mirrors Python's {@code LayerCost}. */
public final class LayerCost {
  public final String name;
  public final long weights;
  public final long biases;
  public final long forwardMacs;
  public final long inputGradMacs;
  public final long weightGradMacs;
  public final long inActivation;
  public final long outActivation;

  LayerCost(String name, long weights, long biases, long forwardMacs, long inputGradMacs,
      long weightGradMacs, long inActivation, long outActivation) {
    this.name = name;
    this.weights = weights;
    this.biases = biases;
    this.forwardMacs = forwardMacs;
    this.inputGradMacs = inputGradMacs;
    this.weightGradMacs = weightGradMacs;
    this.inActivation = inActivation;
    this.outActivation = outActivation;
  }

  /** Weights plus biases. */
  public long params() {
    return weights + biases;
  }
}
