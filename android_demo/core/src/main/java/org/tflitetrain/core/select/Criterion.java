package org.tflitetrain.core.select;

/**
 * Layer-ranking criteria (TinyTrain Eq. 3 and its Table 3 ablations); wire names as in Python's
 * {@code scoring.CRITERIA}.
 */
public enum Criterion {
  /** s = P / ((|W|/max|W|) (M/max M)) (Eq. 3). */
  TINYTRAIN("tinytrain"),
  /** s = P. */
  FISHER("fisher"),
  /** s = P / (|W|/max|W|). */
  FISHER_MEMORY("fisher_memory"),
  /** s = P / (M/max M). */
  FISHER_COMPUTE("fisher_compute"),
  /** s = ||W||_2 (needs the layers' weights). */
  L2("l2");

  public final String wireName;

  Criterion(String wireName) {
    this.wireName = wireName;
  }

  /** @throws IllegalArgumentException for an unknown name */
  public static Criterion fromName(String name) {
    for (Criterion c : values()) {
      if (c.wireName.equals(name)) {
        return c;
      }
    }
    throw new IllegalArgumentException("criterion must be one of tinytrain, fisher, fisher_memory, fisher_compute, l2;"
        + " got " + name);
  }
}
