package org.tflitetrain.core.adapt;

/** Progress callbacks of {@link AdaptationDriver#adapt}; called on the adapting thread. */
public interface AdaptationListener {
  /** Stages in the order they run. */
  enum Stage { RESET, PROTOTYPES, FISHER, SELECTION, TRAINING, REFRESH, DONE }

  void onStage(Stage stage);

  /** After train_step {@code step} (1-based) of {@code total}. */
  void onStep(int step, int total, float loss, float accuracy);

  /** A listener that ignores everything. */
  AdaptationListener NONE = new AdaptationListener() {
    @Override
    public void onStage(Stage stage) {}

    @Override
    public void onStep(int step, int total, float loss, float accuracy) {}
  };
}
