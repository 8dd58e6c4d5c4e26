package org.tflitetrain.core.json;

/** Malformed JSON text; the message names the character offset. */
public final class JsonException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  public JsonException(String message) {
    super(message);
  }
}
