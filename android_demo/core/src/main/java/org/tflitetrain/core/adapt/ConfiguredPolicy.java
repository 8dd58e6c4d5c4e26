package org.tflitetrain.core.adapt;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.tflitetrain.core.model.ModelMetadata;
import org.tflitetrain.core.select.Budget;
import org.tflitetrain.core.select.ChannelMethod;
import org.tflitetrain.core.select.Criterion;
import org.tflitetrain.core.select.OnEmpty;
import org.tflitetrain.core.select.Policies;
import org.tflitetrain.core.select.PolicyKind;
import org.tflitetrain.core.select.SelectedChannels;
import org.tflitetrain.core.select.SelectionConfig;

/**
 * A {@link SelectionPolicy} backed by the Java port of the Python policies ({@link Policies}). The
 * driver's budget, train batch size and the model's optimizer replace the template config's values on
 * every call; the candidates are the metadata's (or a continued run's, above its replay cut). TinyTrain's
 * default is {@link #tinyTrain()}: Eq. 3 scores, greedy layers under the budget, top-K Fisher channels at ratio
 * 0.25, no update when nothing fits ({@link OnEmpty#EMPTY}).
 */
public final class ConfiguredPolicy implements SelectionPolicy {
  private final SelectionConfig template;
  private final List<Map<String, double[]>> fisherTasks;
  private final Map<String, double[]> weights;

  /**
   * @param template policy, channel ratio, criterion, channel method, on_empty, fixed layers
   * @param fisherTasks meta-training Fisher maps for SparseUpdate's mean-Fisher ranking, or null
   * @param weights candidate layer -> weights, output channel last (L2 channels / criterion), or null
   */
  public ConfiguredPolicy(SelectionConfig template, List<Map<String, double[]>> fisherTasks,
      Map<String, double[]> weights) {
    if (template == null) {
      throw new IllegalArgumentException("template config must not be null");
    }
    this.template = template;
    this.fisherTasks = fisherTasks == null ? null : List.copyOf(fisherTasks);
    this.weights = weights == null ? null : Map.copyOf(weights);
  }

  /** TinyTrain with the defaults: ratio 0.25, Eq. 3 criterion, Fisher channels, no update if nothing fits. */
  public static ConfiguredPolicy tinyTrain() {
    return tinyTrain(0.25, Criterion.TINYTRAIN, OnEmpty.EMPTY);
  }

  /** TinyTrain with Fisher channels. */
  public static ConfiguredPolicy tinyTrain(double channelRatio, Criterion criterion, OnEmpty onEmpty) {
    return new ConfiguredPolicy(SelectionConfig.builder().policy(PolicyKind.TINYTRAIN).channelRatio(channelRatio)
        .criterion(criterion).channelMethod(ChannelMethod.FISHER).onEmpty(onEmpty).build(), null, null);
  }

  /** A budget-free baseline: NONE, LAST_LAYER or FULL_TRAIN. */
  public static ConfiguredPolicy baseline(PolicyKind kind) {
    if (kind == PolicyKind.TINYTRAIN || kind == PolicyKind.SPARSE_UPDATE) {
      throw new IllegalArgumentException("baseline must be none, last_layer or full_train; got " + kind);
    }
    return new ConfiguredPolicy(SelectionConfig.builder().policy(kind).build(), null, null);
  }

  /** The config a call runs with. */
  public SelectionConfig resolve(ModelMetadata metadata, Budget budget, int batchSize) {
    return template.toBuilder().budget(budget).batchSize(batchSize).optimizer(metadata.optimizer.optimizer).build();
  }

  @Override
  public Selection select(ModelMetadata metadata, FisherScores fisher, Budget budget, int batchSize) {
    return select(metadata, fisher, budget, batchSize, metadata.candidates);
  }

  @Override
  public Selection select(ModelMetadata metadata, FisherScores fisher, Budget budget, int batchSize,
      List<String> candidates) {
    Map<String, double[]> delta = new LinkedHashMap<>();
    for (String name : fisher.layers()) {
      float[] values = fisher.layer(name);
      double[] widened = new double[values.length];
      for (int i = 0; i < values.length; i++) {
        widened[i] = values[i];
      }
      delta.put(name, widened);
    }
    SelectedChannels chosen = Policies.select(metadata.table, resolve(metadata, budget, batchSize),
        candidates, delta, fisherTasks, weights);
    return new Selection(metadata, chosen.channelMap());
  }

  @Override
  public String name() {
    return template.policy.wireName;
  }
}
