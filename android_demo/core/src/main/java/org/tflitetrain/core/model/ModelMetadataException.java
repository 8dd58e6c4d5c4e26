package org.tflitetrain.core.model;

/** The model's metadata is missing, malformed, of another format or of an unsupported version. */
public final class ModelMetadataException extends Exception {
  private static final long serialVersionUID = 1L;

  public ModelMetadataException(String message) {
    super(message);
  }

  public ModelMetadataException(String message, Throwable cause) {
    super(message, cause);
  }
}
