package org.tflitetrain.core.model;

import org.tflitetrain.core.cost.Optimizer;

/** The {@code optimizer} entry: which optimizer the train_step signature runs, with its defaults. */
public final class OptimizerConfig {
  public final Optimizer optimizer;
  public final double learningRate;
  public final double beta1;
  public final double beta2;
  public final double epsilon;
  public final double momentum;

  OptimizerConfig(Optimizer optimizer, double learningRate, double beta1, double beta2, double epsilon,
      double momentum) {
    this.optimizer = optimizer;
    this.learningRate = learningRate;
    this.beta1 = beta1;
    this.beta2 = beta2;
    this.epsilon = epsilon;
    this.momentum = momentum;
  }
}
