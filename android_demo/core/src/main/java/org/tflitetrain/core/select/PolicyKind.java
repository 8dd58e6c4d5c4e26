package org.tflitetrain.core.select;

/** The selection policies of Python's {@code sparse.policies.POLICIES}. */
public enum PolicyKind {
  /** No update. */
  NONE("none"),
  /** The deepest candidate, all channels (budget ignored). */
  LAST_LAYER("last_layer"),
  /** Every candidate, all channels (budget ignored). */
  FULL_TRAIN("full_train"),
  /** Static: offline ranking (mean Fisher over tasks or a fixed list), greedy, L2-norm channels. */
  SPARSE_UPDATE("sparse_update"),
  /** Dynamic: this task's Fisher -> scores -> greedy -> top-K Fisher channels (Algorithm 1). */
  TINYTRAIN("tinytrain");

  public final String wireName;

  PolicyKind(String wireName) {
    this.wireName = wireName;
  }

  /** Case, '_' and '-' are ignored ("TinyTrain", "last-layer" work). */
  public static PolicyKind fromName(String name) {
    if (name != null) {
      String key = name.trim().toLowerCase(java.util.Locale.ROOT).replace("_", "").replace("-", "");
      for (PolicyKind p : values()) {
        if (p.wireName.replace("_", "").equals(key)) {
          return p;
        }
      }
    }
    throw new IllegalArgumentException("unknown policy " + name
        + "; known policies: none, last_layer, full_train, sparse_update, tinytrain");
  }
}
