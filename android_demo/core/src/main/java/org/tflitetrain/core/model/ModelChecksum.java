package org.tflitetrain.core.model;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * The integrity seal of an exported model (CONTRACT.md "Integrity"; Python
 * {@code tflite_train.runtime.model.integrity}): the metadata entry {@link Contract#CHECKSUM_NAME} holds the 64 hex
 * digits of the sha256 of the whole file with those 64 bytes read as ASCII {@code '0'}. {@link #verify} runs
 * before the bytes reach an {@code Interpreter} (native code): a truncated, bit-flipped or spliced file, or one
 * without a seal, is refused naming the entry.
 */
public final class ModelChecksum {
  /** Length of the seal: 64 lower-case hex digits. */
  public static final int DIGITS = 64;

  private ModelChecksum() {}

  /**
   * Refuses {@code model} unless its seal equals {@link #digest} of its bytes.
   *
   * @param model the whole {@code .tflite} file (position and limit ignored: read from 0 to capacity)
   * @throws ModelMetadataException naming {@link Contract#CHECKSUM_NAME}: no seal, a malformed one, or a mismatch
   */
  public static void verify(ByteBuffer model) throws ModelMetadataException {
    int[] span;
    try {
      span = TfliteMetadataReader.span(model, Contract.CHECKSUM_NAME);
    } catch (ModelMetadataException err) {
      throw new ModelMetadataException("model integrity: " + err.getMessage() + " (no " + Contract.CHECKSUM_NAME
          + " seal: re-export the model)", err);
    }
    if (span[1] != DIGITS) {
      throw new ModelMetadataException("model integrity: metadata entry " + Contract.CHECKSUM_NAME + " has " + span[1]
          + " bytes, not " + DIGITS);
    }
    byte[] stored = new byte[DIGITS];
    ByteBuffer view = model.duplicate();
    view.clear();
    view.position(span[0]);
    view.get(stored);
    String actual = digest(model, span[0]);
    if (!actual.equals(new String(stored, StandardCharsets.US_ASCII))) {
      throw new ModelMetadataException("model integrity: metadata entry " + Contract.CHECKSUM_NAME + " = "
          + new String(stored, StandardCharsets.US_ASCII) + " but the file's sha256 is " + actual
          + ": the file is corrupted or was modified after export");
    }
  }

  /**
   * The seal {@code model} should hold: sha256 (hex) of the file with the {@code DIGITS} bytes at {@code sealAt}
   * read as ASCII {@code '0'}.
   */
  public static String digest(ByteBuffer model, int sealAt) {
    MessageDigest sha;
    try {
      sha = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException err) {
      throw new IllegalStateException("SHA-256 unavailable", err);
    }
    ByteBuffer view = model.duplicate();
    view.clear();
    view.limit(sealAt);
    sha.update(view);
    byte[] zeros = new byte[DIGITS];
    java.util.Arrays.fill(zeros, (byte) '0');
    sha.update(zeros);
    view.clear();
    view.position(sealAt + DIGITS);
    sha.update(view);
    StringBuilder hex = new StringBuilder();
    for (byte b : sha.digest()) {
      hex.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
    }
    return hex.toString();
  }
}
