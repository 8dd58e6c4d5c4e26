package org.tflitetrain.core.adapt;

import java.util.Map;

/**
 * Runs one signature of the exported model: the only interpreter access the core needs. On Android
 * it wraps {@code org.tensorflow.lite.Interpreter.runSignature}; in JVM tests a checking runner enforces that
 * API's preconditions (non-empty inputs, exact names, dtypes and shapes).
 */
public interface SignatureRunner {
  /**
   * @param signature signature key, e.g. "infer", "fisher", "train_step", "set_selection"
   * @param inputs input name -> tensor; never empty (every signature takes at least one input, CONTRACT.md)
   * @return output name -> tensor
   * @throws Exception whatever the interpreter throws (wrong shapes, missing signature, ...)
   */
  Map<String, Tensor> run(String signature, Map<String, Tensor> inputs) throws Exception;
}
