package org.tflitetrain.core.select;

/** What to do when a budget fits no candidate layer (Python {@code layer_selection.ON_EMPTY}). */
public enum OnEmpty {
  /** Throw a {@link BudgetException}. */
  RAISE("raise"),
  /** Return an empty selection ("no update"). */
  EMPTY("empty");

  public final String wireName;

  OnEmpty(String wireName) {
    this.wireName = wireName;
  }

  /** @throws IllegalArgumentException for an unknown name */
  public static OnEmpty fromName(String name) {
    for (OnEmpty o : values()) {
      if (o.wireName.equals(name)) {
        return o;
      }
    }
    throw new IllegalArgumentException("on_empty must be one of raise, empty; got " + name);
  }
}
