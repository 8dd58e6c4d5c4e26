package org.tflitetrain.core.select;

import org.tflitetrain.core.cost.BackwardCost;
import org.tflitetrain.core.cost.CostModel;
import org.tflitetrain.core.cost.LayerTable;

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
 * Both bounds are inclusive; a missing bound is unlimited (memory: {@code Double.POSITIVE_INFINITY}).
 * At most one of {@code computeMacs} and {@code computeFraction} is given. The paper's example is
 * {@code Budget.withFraction(1 << 20, 0.15)} (1 MiB, 15 % of the full backward pass).
 */
public final class Budget {
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
