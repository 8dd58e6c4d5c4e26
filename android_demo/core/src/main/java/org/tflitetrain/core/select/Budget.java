package org.tflitetrain.core.select;

import java.util.Collection;
import java.util.Collections;
import java.util.Objects;
import java.util.TreeSet;
import org.tflitetrain.core.cost.BackwardCost;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.cost.LayerSpec;
import org.tflitetrain.core.cost.LayerTable;
import org.tflitetrain.core.cost.Optimizer;

/**
 * Backward-pass budget B_mem / B_compute (TinyTrain Algorithm 1); port of {@code sparse/budget.py}.
 *
 * <pre>
 *   cost.totalBytes()   &lt;= memoryBytes                                  (B_mem)
 *   cost.backwardMacs() &lt;= computeMacs, or
 *   cost.backwardMacs() &lt;= computeFraction * fullBackwardMacs(table)     (B_compute)
 * </pre>
 *
 * A relative B_compute is a fraction of the full backward pass: FullTrain's backward MACs per sample
 * at the model's input size ({@link CostModel#fullBackwardMacs}), as in Python's {@code sparse/budget.py}.
 *
 * B_mem bounds the paper's peak memory of the backward pass (appendix A.4; {@link BackwardCost#totalBytes}).
 * The paper's 1 MiB (set for MCUNet at 128x128) carried to a model is scaled by the model's LastLayer backward
 * memory, {@link #scaledMemoryBytes(LayerTable)} (Python's {@code sparse.budget.scaled_memory_budget}). The
 * default budget of a run, {@link #defaultBudget}, is that B_mem and the default B_compute, raised, only when
 * they admit none of the candidate layers alone, just enough to admit the candidate that needs the least raise
 * ({@link #admitting}): the one definition of Python's {@code sparse.budget.default_budget} (CLI, exporter,
 * demo, bench).
 *
 * Both bounds are inclusive; a missing bound is unlimited (memory: {@code Double.POSITIVE_INFINITY}).
 * At most one of {@code computeMacs} and {@code computeFraction} is given. The paper's example is
 * {@code Budget.withFraction(1 << 20, 0.15)} (1 MiB, 15 % of the full backward pass).
 */
public final class Budget {
  /** The paper's B_mem ("around 1 MB"), set for MCUNet at 128x128; Python {@code PAPER_MEMORY_BYTES}. */
  public static final double PAPER_MEMORY_BYTES = 1 << 20;
  /** M_LastLayer(MCUNet@128) in bytes (Adam, batch 1); Python {@code REFERENCE_LAST_LAYER_BYTES}. */
  public static final long REFERENCE_LAST_LAYER_BYTES = 2_132_480L;

  /** B_mem in bytes; +inf = unlimited. */
  public final double memoryBytes;
  /** Absolute B_compute in backward MACs, or null. */
  public final Double computeMacs;
  /** B_compute as a fraction of the full backward pass (FullTrain's backward MACs), or null. */
  public final Double computeFraction;

  /**
   * @throws IllegalArgumentException for a negative / NaN limit, or both compute bounds
   */
  public Budget(double memoryBytes, Double computeMacs, Double computeFraction) {
    check("memoryBytes", memoryBytes);
    if (computeMacs != null) {
      check("computeMacs", computeMacs);
    }
    if (computeFraction != null) {
      check("computeFraction", computeFraction);
    }
    if (computeMacs != null && computeFraction != null) {
      throw new IllegalArgumentException("give computeMacs or computeFraction, not both; got " + computeMacs
          + " and " + computeFraction);
    }
    this.memoryBytes = memoryBytes;
    this.computeMacs = computeMacs;
    this.computeFraction = computeFraction;
  }

  /** No limit at all. */
  public static Budget unlimited() {
    return new Budget(Double.POSITIVE_INFINITY, null, null);
  }

  /** Memory in bytes and an absolute compute limit in backward MACs. */
  public static Budget of(double memoryBytes, double computeMacs) {
    return new Budget(memoryBytes, computeMacs, null);
  }

  /** Memory in bytes and compute as a fraction of the full backward pass (FullTrain's backward MACs). */
  public static Budget withFraction(double memoryBytes, double computeFraction) {
    return new Budget(memoryBytes, null, computeFraction);
  }

  private static void check(String argument, double value) {
    if (Double.isNaN(value) || value < 0) {
      throw new IllegalArgumentException(argument + " must be a number >= 0 (not NaN); got " + value);
    }
  }

  /** B_compute in MACs: computeMacs, or computeFraction * fullBackwardMacs(table), or +inf. */
  public double computeLimit(LayerTable table) {
    if (computeMacs != null) {
      return computeMacs;
    }
    if (computeFraction != null) {
      return computeFraction * (double) CostModel.fullBackwardMacs(table);
    }
    return Double.POSITIVE_INFINITY;
  }

  /**
   * M_LastLayer: backward memory in bytes of updating every output channel of the table's last layer
   * with Adam at batch 1 (Python {@code sparse.budget.last_layer_memory}).
   */
  public static long lastLayerMemory(LayerTable table) {
    LayerSpec last = table.get(table.size() - 1);
    return CostModel.backwardCost(table, Collections.singletonMap(last.index, last.outChannels), Optimizer.ADAM, 1,
        true).totalBytes();
  }

  /**
   * B_mem in bytes for the model of {@code table}: {@code referenceBytes} (a budget for MCUNet@128) scaled
   * by the model's LastLayer backward memory, as Python's {@code scaled_memory_budget}:
   * <pre>
   *   B_mem = referenceBytes * M_LastLayer(table) / M_LastLayer(MCUNet@128)
   * </pre>
   *
   * @throws IllegalArgumentException for a negative or NaN {@code referenceBytes}
   */
  public static double scaledMemoryBytes(LayerTable table, double referenceBytes) {
    check("referenceBytes", referenceBytes);
    return referenceBytes * lastLayerMemory(table) / REFERENCE_LAST_LAYER_BYTES;
  }

  /** The default B_mem of a model: {@link #scaledMemoryBytes(LayerTable, double)} of the paper's 1 MiB. */
  public static double scaledMemoryBytes(LayerTable table) {
    return scaledMemoryBytes(table, PAPER_MEMORY_BYTES);
  }

  private static double need(double used, double limit) {
    if (Double.isInfinite(limit) || used == 0) {
      return 0.0;
    }
    return limit > 0 ? used / limit : Double.POSITIVE_INFINITY;
  }

  /**
   * The candidate layer that needs the least raise of this budget to be updated alone (Python
   * {@code admitting_layer}): over the candidates in forward order, with c_l the backward cost of
   * {@code channelCount(C_out_l, channelRatio)} channels of l alone,
   * <pre>
   *   need_l = max(c_l.totalBytes / B_mem, c_l.backwardMacs / B_compute)   (a bound not raised: 0, and l
   *                                                                          must fit it)
   * </pre>
   * the first l of least need.
   *
   * @return the table index of that layer, or -1 when this budget already admits a candidate alone or no
   *     allowed raise would admit one
   */
  public int admittingLayer(LayerTable table, Collection<String> candidates, double channelRatio,
      Optimizer optimizer, int batchSize, boolean raiseMemory, boolean raiseCompute) {
    TreeSet<Integer> indices = new TreeSet<>();
    for (String name : candidates) {
      indices.add(table.indexOf(name));
    }
    double compute = computeLimit(table);
    int best = -1;
    double bestNeed = Double.POSITIVE_INFINITY;
    for (int index : indices) {
      BackwardCost cost = singleLayerCost(table, index, channelRatio, optimizer, batchSize);
      if (admits(cost, table)) {
        return -1;
      }
      if ((!raiseMemory && cost.totalBytes() > memoryBytes) || (!raiseCompute && cost.backwardMacs() > compute)) {
        continue;
      }
      double need = Math.max(raiseMemory ? need(cost.totalBytes(), memoryBytes) : 0.0,
          raiseCompute ? need(cost.backwardMacs(), compute) : 0.0);
      if (best < 0 || need < bestNeed) {
        best = index;
        bestNeed = need;
      }
    }
    return best;
  }

  private static BackwardCost singleLayerCost(LayerTable table, int index, double channelRatio, Optimizer optimizer,
      int batchSize) {
    int channels = CostModel.channelCount(table.get(index).outChannels, channelRatio);
    return CostModel.backwardCost(table, Collections.singletonMap(index, channels), optimizer, batchSize, true);
  }

  /**
   * This budget raised just enough to admit {@link #admittingLayer}'s layer l (Python {@code admitting_budget}):
   * B_mem = max(B_mem, c_l.totalBytes), B_compute = max(B_compute, c_l.backwardMacs) (then absolute MACs);
   * this budget itself when no layer is to be admitted.
   */
  public Budget admitting(LayerTable table, Collection<String> candidates, double channelRatio, Optimizer optimizer,
      int batchSize, boolean raiseMemory, boolean raiseCompute) {
    int index = admittingLayer(table, candidates, channelRatio, optimizer, batchSize, raiseMemory, raiseCompute);
    if (index < 0) {
      return this;
    }
    BackwardCost cost = singleLayerCost(table, index, channelRatio, optimizer, batchSize);
    double memory = raiseMemory ? Math.max(memoryBytes, (double) cost.totalBytes()) : memoryBytes;
    if (raiseCompute && cost.backwardMacs() > computeLimit(table)) {
      return new Budget(memory, (double) cost.backwardMacs(), null);
    }
    return new Budget(memory, computeMacs, computeFraction);
  }

  /**
   * The default budget of a run (Python {@code default_budget}): {@code scaledMemoryBytes(table)} and
   * {@code computeFraction} of the full backward pass, {@link #admitting} one of {@code candidates} when they
   * admit none alone (both bounds may be raised).
   *
   * @param computeFraction the default B_compute as a fraction of the full backward pass (the protocol's
   *     0.15, {@code Contract.PROTOCOL_COMPUTE_FRACTION}), or null for none
   */
  public static Budget defaultBudget(LayerTable table, Collection<String> candidates, Double computeFraction,
      double channelRatio, Optimizer optimizer, int batchSize) {
    return new Budget(scaledMemoryBytes(table), null, computeFraction).admitting(table, candidates, channelRatio,
        optimizer, batchSize, true, true);
  }

  /** True when {@code cost} fits both bounds (inclusive). */
  public boolean admits(BackwardCost cost, LayerTable table) {
    return cost.totalBytes() <= memoryBytes && cost.backwardMacs() <= computeLimit(table);
  }

  @Override
  public boolean equals(Object other) {
    if (!(other instanceof Budget)) {
      return false;
    }
    Budget that = (Budget) other;
    return Double.compare(memoryBytes, that.memoryBytes) == 0 && Objects.equals(computeMacs, that.computeMacs)
        && Objects.equals(computeFraction, that.computeFraction);
  }

  @Override
  public int hashCode() {
    return Objects.hash(memoryBytes, computeMacs, computeFraction);
  }

  @Override
  public String toString() {
    return "Budget(memoryBytes=" + memoryBytes + ", computeMacs=" + computeMacs + ", computeFraction="
        + computeFraction + ")";
  }
}
