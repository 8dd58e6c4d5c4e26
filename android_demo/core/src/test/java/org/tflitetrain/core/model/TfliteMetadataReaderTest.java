package org.tflitetrain.core.model;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import org.junit.Test;

public class TfliteMetadataReaderTest {
  static final byte[] JSON = ModelMetadataTest.GOLDEN.getBytes(StandardCharsets.UTF_8);
  static final byte[] SELFTEST = {1, 2, 3, 4, 5};

  /**
   * Builds a Model with fields version, (operator_codes, subgraphs absent), description, buffers,
   * (metadata_buffer absent), metadata; buffers: [empty, selftest inline, JSON inline or external].
   */
  static byte[] model(boolean external, String metadataName) {
    FlatBufferWriter w = new FlatBufferWriter();
    FlatBufferWriter.Table model = w.table(4, 0, 0, 4, 4, 0, 4);
    w.root(model);
    w.u32(model.fields[0], 3);
    w.link(model.fields[3], w.string("test model"));
    int buffers = w.offsetVector(3);
    w.link(model.fields[4], buffers);
    FlatBufferWriter.Table empty = w.table();
    w.link(buffers + 4, empty.pos);
    FlatBufferWriter.Table selftest = w.table(4);
    w.link(buffers + 8, selftest.pos);
    w.link(selftest.fields[0], w.bytes(SELFTEST));
    FlatBufferWriter.Table json = external ? w.table(0, 8, 8) : w.table(4);
    w.link(buffers + 12, json.pos);
    if (!external) {
      w.link(json.fields[0], w.bytes(JSON));
    }
    int metadata = w.offsetVector(2);
    w.link(model.fields[6], metadata);
    FlatBufferWriter.Table first = w.table(4, 4);
    w.link(metadata + 4, first.pos);
    w.link(first.fields[0], w.string("tflite_train_selftest"));
    w.u32(first.fields[1], 1);
    FlatBufferWriter.Table second = w.tableSharingVtable(first);
    w.link(metadata + 8, second.pos);
    w.link(second.fields[0], w.string(metadataName));
    w.u32(second.fields[1], 2);
    if (external) {
      int at = w.appendRaw(JSON);
      w.u64(json.fields[1], at);
      w.u64(json.fields[2], JSON.length);
    }
    return w.finish();
  }

  @Test
  public void readsInlineMetadata() throws Exception {
    ByteBuffer file = ByteBuffer.wrap(model(false, "tflite_train"));
    assertArrayEquals(JSON, TfliteMetadataReader.read(file, "tflite_train"));
    assertArrayEquals(SELFTEST, TfliteMetadataReader.read(file, "tflite_train_selftest"));
    assertEquals(List.of("tflite_train_selftest", "tflite_train"), TfliteMetadataReader.names(file));
    assertEquals("tiny", ModelMetadata.fromTflite(file).backbone);
  }

  @Test
  public void readsExternalBuffer() throws Exception {
    ByteBuffer file = ByteBuffer.wrap(model(true, "tflite_train"));
    assertArrayEquals(JSON, TfliteMetadataReader.read(file, "tflite_train"));
    assertEquals(ModelMetadata.parse(JSON).modelId, ModelMetadata.fromTflite(file).modelId);
  }

  @Test
  public void readsDirectBuffersIgnoringPosition() throws Exception {
    byte[] bytes = model(false, "tflite_train");
    ByteBuffer direct = ByteBuffer.allocateDirect(bytes.length);
    direct.put(bytes);
    assertArrayEquals(JSON, TfliteMetadataReader.read(direct, "tflite_train"));
  }

  private static void assertRejected(byte[] file, String fragment) {
    ModelMetadataException err = assertThrows(ModelMetadataException.class,
        () -> TfliteMetadataReader.read(ByteBuffer.wrap(file), "tflite_train"));
    assertTrue(err.getMessage(), err.getMessage().contains(fragment));
  }

  @Test
  public void missingEntryIsClear() {
    assertRejected(model(false, "other"), "no metadata entry \"tflite_train\"");
  }

  @Test
  public void foreignOrTruncatedFilesAreRejected() {
    assertRejected(new byte[3], "not a .tflite file");
    byte[] foreign = model(false, "tflite_train");
    foreign[4] = 'X';
    assertRejected(foreign, "file identifier");
    byte[] full = model(false, "tflite_train");
    int failures = 0;
    for (int cut = 8; cut < full.length - JSON.length; cut += 7) {
      byte[] truncated = Arrays.copyOf(full, cut);
      try {
        TfliteMetadataReader.read(ByteBuffer.wrap(truncated), "tflite_train");
      } catch (ModelMetadataException expected) {
        failures++;
      }
    }
    assertEquals("every truncation must fail with ModelMetadataException", (full.length - JSON.length - 8 + 6) / 7, failures);
  }

  @Test
  public void externalBufferOutsideFileIsRejected() {
    byte[] file = model(true, "tflite_train");
    assertRejected(Arrays.copyOf(file, file.length - 10), "outside");
  }
}
