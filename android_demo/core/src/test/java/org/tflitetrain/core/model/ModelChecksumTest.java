package org.tflitetrain.core.model;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.Test;

/**
 * The integrity seal on real exported models ({@code build/test-models}): every fixture verifies; a copy with one
 * flipped byte (in the weights, in the metadata JSON, in the seal itself), a truncated copy and a model without
 * a seal are refused by {@link ModelChecksum#verify} and by {@link ModelMetadata#load} naming
 * {@link Contract#CHECKSUM_NAME}, before any interpreter could see the bytes.
 */
public class ModelChecksumTest {
  /** Writes the correct seal into {@code data} (for tests that edit a model on purpose). */
  static void reseal(byte[] data) throws ModelMetadataException {
    int[] span = TfliteMetadataReader.span(ByteBuffer.wrap(data), Contract.CHECKSUM_NAME);
    byte[] digest = ModelChecksum.digest(ByteBuffer.wrap(data), span[0]).getBytes(StandardCharsets.US_ASCII);
    System.arraycopy(digest, 0, data, span[0], digest.length);
  }

  private static byte[] fixture() throws Exception {
    Path tiny = null;
    for (Path model : ExportedModelFixturesTest.models()) {
      if (model.getFileName().toString().startsWith("tiny_adam")) {
        tiny = model;
      }
    }
    assertTrue("no tiny_adam_*.tflite fixture", tiny != null);
    return Files.readAllBytes(tiny);
  }

  private static String refusal(byte[] data) {
    ModelMetadataException err = assertThrows(ModelMetadataException.class,
        () -> ModelChecksum.verify(ByteBuffer.wrap(data)));
    ModelMetadataException viaLoad = assertThrows(ModelMetadataException.class,
        () -> ModelMetadata.load(ByteBuffer.wrap(data)));
    assertEquals(err.getMessage(), viaLoad.getMessage());
    assertTrue(err.getMessage(), err.getMessage().contains(Contract.CHECKSUM_NAME));
    return err.getMessage();
  }

  @Test
  public void everyExportedModelVerifies() throws Exception {
    for (Path model : ExportedModelFixturesTest.models()) {
      byte[] data = Files.readAllBytes(model);
      ModelChecksum.verify(ByteBuffer.wrap(data));
      int[] span = TfliteMetadataReader.span(ByteBuffer.wrap(data), Contract.CHECKSUM_NAME);
      assertEquals(model.toString(), ModelChecksum.DIGITS, span[1]);
      assertEquals(model.toString(), ModelChecksum.digest(ByteBuffer.wrap(data), span[0]),
          new String(data, span[0], span[1], StandardCharsets.US_ASCII));
    }
  }

  @Test
  public void aFlippedByteIsRefusedNamingTheSeal() throws Exception {
    byte[] data = fixture();
    int[] seal = TfliteMetadataReader.span(ByteBuffer.wrap(data), Contract.CHECKSUM_NAME);
    int[] json = TfliteMetadataReader.span(ByteBuffer.wrap(data), Contract.METADATA_NAME);
    int weights = data.length / 2;  // the middle of the file: constant weight buffers
    assertTrue(weights < Math.min(seal[0], json[0]) || weights > seal[0] + seal[1]);
    for (int at : new int[] {weights, json[0] + json[1] / 2, seal[0] + 5}) {
      byte[] copy = data.clone();
      copy[at] ^= 0x01;
      String message = refusal(copy);
      assertTrue(message, message.contains("corrupted or was modified"));
    }
  }

  @Test
  public void aTruncatedFileOrOneWithoutASealIsRefused() throws Exception {
    byte[] data = fixture();
    refusal(Arrays.copyOf(data, data.length - 1000));
    byte[] unsealed = TfliteMetadataReaderTest.model(false, Contract.METADATA_NAME);
    String message = refusal(unsealed);
    assertTrue(message, message.contains("re-export"));
  }

  @Test
  public void resealingAnEditedFileMakesItVerifyAgain() throws Exception {
    byte[] data = fixture();
    data[data.length / 2] ^= 0x01;
    refusal(data);
    reseal(data);
    ModelChecksum.verify(ByteBuffer.wrap(data));
  }
}
