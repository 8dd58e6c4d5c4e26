package org.tflitetrain.core.select;

import java.util.Collections;
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
 * Its default for a model is the paper's 1 MiB (set for MCUNet at 128x128) scaled by the model's LastLayer
 * backward memory, {@link #scaledMemoryBytes(LayerTable)}: the one definition of Python's
 * {@code sparse.budget.scaled_memory_budget} (CLI, demo, bench).
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

  /** True when {@code cost} fits both bounds (inclusive). */
  public boolean admits(BackwardCost cost, LayerTable table) {
    return cost.totalBytes() <= memoryBytes && cost.backwardMacs() <= computeLimit(table);
  }

  @Override
  public String toString() {
    return "Budget(memoryBytes=" + memoryBytes + ", computeMacs=" + computeMacs + ", computeFraction="
        + computeFraction + ")";
  }
}
