package org.tflitetrain.core.adapt;

import java.io.IOException;

/**
 * A checkpoint that is corrupt, truncated, of another format or version, has a header field of the wrong
 * type, out of range or inconsistent, or does not fit the model; the message is one line naming the field.
 */
public final class CheckpointException extends IOException {
  private static final long serialVersionUID = 1L;

  public CheckpointException(String message) {
    super(message);
  }
}
