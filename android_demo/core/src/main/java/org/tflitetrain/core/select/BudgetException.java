package org.tflitetrain.core.select;

/** No candidate layer fits the budget and the caller asked for an error (Python {@code BudgetError}). */
public final class BudgetException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  public BudgetException(String message) {
    super(message);
  }
}
