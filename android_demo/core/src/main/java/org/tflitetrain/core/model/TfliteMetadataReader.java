package org.tflitetrain.core.model;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads named entries of a {@code .tflite} flatbuffer's {@code Model.metadata} list, without the
 * flatbuffers library or the TFLite runtime.
 *
 * <p>Flatbuffer layout (little-endian): the file starts with a uoffset (u32) to the root table; a
 * table at position t starts with an soffset (i32) s, its vtable is at t - s and holds u16 vtable size,
 * u16 table size, then one u16 field offset per field (0 = absent). Offsets to strings, vectors and
 * sub-tables are u32 relative to where they are stored; a vector/string is a u32 length then its elements.
 * TFLite schema: Model fields version(0), operator_codes(1), subgraphs(2), description(3), buffers(4),
 * metadata_buffer(5), metadata(6), signature_defs(7); Metadata name(0) string, buffer(1) u32 index into
 * buffers; Buffer data(0) [ubyte], offset(1) u64, size(2) u64 — when offset > 1 the bytes live outside
 * the flatbuffer at that absolute file offset (the large-model layout). SignatureDef inputs(0),
 * outputs(1) [TensorMap{name(0), tensor_index(1)}], signature_key(2), subgraph_index(4); SubGraph
 * tensors(0); Tensor shape(0) [int], type(1) byte, shape_signature(7) [int].
 */
public final class TfliteMetadataReader {
  private static final int MODEL_BUFFERS = 4;
  private static final int MODEL_METADATA = 6;
  private static final int METADATA_NAME = 0;
  private static final int METADATA_BUFFER = 1;
  private static final int BUFFER_DATA = 0;
  private static final int BUFFER_OFFSET = 1;
  private static final int BUFFER_SIZE = 2;
  private static final int MODEL_SUBGRAPHS = 2;
  private static final int MODEL_SIGNATURE_DEFS = 7;
  private static final String[] TENSOR_TYPES = {"float32", "float16", "int32", "uint8", "int64", "string", "bool",
      "int16", "complex64", "int8", "float64"};

  private final ByteBuffer buf;

  private TfliteMetadataReader(ByteBuffer model) {
    buf = model.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    buf.position(0);
  }

  /**
   * Bytes of the metadata entry {@code name}.
   *
   * @param model the whole {@code .tflite} file (position and limit ignored: read from 0 to capacity)
   * @throws ModelMetadataException for a truncated or foreign file, or when the entry is missing
   */
  public static byte[] read(ByteBuffer model, String name) throws ModelMetadataException {
    int[] span = span(model, name);
    return new TfliteMetadataReader(model).slice(span[0], span[1]);
  }

  /**
   * Where the bytes of the metadata entry {@code name} lie in the file: {start, length}.
   *
   * @throws ModelMetadataException for a truncated or foreign file, or when the entry is missing
   */
  public static int[] span(ByteBuffer model, String name) throws ModelMetadataException {
    TfliteMetadataReader reader = new TfliteMetadataReader(model);
    try {
      int root = reader.root();
      for (int entry : reader.tableVector(root, MODEL_METADATA)) {
        if (name.equals(reader.string(entry, METADATA_NAME))) {
          long index = reader.u32Field(entry, METADATA_BUFFER);
          return reader.bufferSpan(root, index, name);
        }
      }
      throw new ModelMetadataException("the model has no metadata entry \"" + name + "\" (entries: "
          + reader.names(root) + "); was it exported by tflite-train?");
    } catch (IndexOutOfBoundsException | IllegalArgumentException err) {
      throw new ModelMetadataException("not a valid .tflite flatbuffer (truncated or corrupt): " + err.getMessage(), err);
    }
  }

  /** Names of all metadata entries, in file order. */
  public static List<String> names(ByteBuffer model) throws ModelMetadataException {
    TfliteMetadataReader reader = new TfliteMetadataReader(model);
    try {
      return reader.names(reader.root());
    } catch (IndexOutOfBoundsException | IllegalArgumentException err) {
      throw new ModelMetadataException("not a valid .tflite flatbuffer (truncated or corrupt): " + err.getMessage(), err);
    }
  }

  /**
   * The graph's signatures ({@code SignatureDef}s) by key, with each input's and output's dtype and
   * shape signature.
   *
   * @throws ModelMetadataException for a truncated or foreign file
   */
  public static Map<String, GraphSignature> signatures(ByteBuffer model) throws ModelMetadataException {
    TfliteMetadataReader reader = new TfliteMetadataReader(model);
    try {
      int root = reader.root();
      List<Integer> subgraphs = reader.tableVector(root, MODEL_SUBGRAPHS);
      Map<String, GraphSignature> out = new LinkedHashMap<>();
      for (int sig : reader.tableVector(root, MODEL_SIGNATURE_DEFS)) {
        String key = reader.string(sig, 2);
        long index = reader.u32Field(sig, 4);
        if (index >= subgraphs.size()) {
          throw new ModelMetadataException("signature \"" + key + "\" names subgraph " + index + " of "
              + subgraphs.size());
        }
        List<Integer> tensors = reader.tableVector(subgraphs.get((int) index), 0);
        out.put(key, new GraphSignature(key, reader.tensorMap(sig, 0, tensors, key),
            reader.tensorMap(sig, 1, tensors, key)));
      }
      return out;
    } catch (IndexOutOfBoundsException | IllegalArgumentException err) {
      throw new ModelMetadataException("not a valid .tflite flatbuffer (truncated or corrupt): " + err.getMessage(), err);
    }
  }

  private Map<String, GraphSignature.TensorInfo> tensorMap(int sig, int field, List<Integer> tensors, String key)
      throws ModelMetadataException {
    Map<String, GraphSignature.TensorInfo> out = new LinkedHashMap<>();
    for (int item : tableVector(sig, field)) {
      String name = string(item, 0);
      long t = u32Field(item, 1);
      if (t >= tensors.size()) {
        throw new ModelMetadataException("signature \"" + key + "\" tensor " + name + " names tensor " + t + " of "
            + tensors.size());
      }
      int tensor = tensors.get((int) t);
      int[] vec = vector(tensor, 7);
      if (vec[1] < 0) {
        vec = vector(tensor, 0);
      }
      int[] shape = new int[Math.max(vec[1], 0)];
      for (int i = 0; i < shape.length; i++) {
        shape[i] = buf.getInt(vec[0] + 4 * i);
      }
      int at = field(tensor, 1);
      int code = at < 0 ? 0 : buf.get(at);
      String dtype = code >= 0 && code < TENSOR_TYPES.length ? TENSOR_TYPES[code] : "type_" + code;
      out.put(name, new GraphSignature.TensorInfo(dtype, shape));
    }
    return out;
  }

  private List<String> names(int root) {
    List<String> out = new ArrayList<>();
    for (int entry : tableVector(root, MODEL_METADATA)) {
      out.add(string(entry, METADATA_NAME));
    }
    return out;
  }

  private int root() throws ModelMetadataException {
    if (buf.capacity() < 8) {
      throw new ModelMetadataException("not a .tflite file: only " + buf.capacity() + " bytes");
    }
    String identifier = new String(new byte[] {buf.get(4), buf.get(5), buf.get(6), buf.get(7)},
        StandardCharsets.ISO_8859_1);
    if (!"TFL3".equals(identifier)) {
      throw new ModelMetadataException("not a .tflite file: file identifier is \"" + identifier + "\", not \"TFL3\"");
    }
    return offsetAt(0);
  }

  /** Resolves the u32 offset stored at {@code at}. */
  private int offsetAt(int at) {
    long target = at + u32(at);
    if (target >= buf.capacity()) {
      throw new IllegalArgumentException("offset at " + at + " points past the end (" + target + ")");
    }
    return (int) target;
  }

  private long u32(int at) {
    return buf.getInt(at) & 0xFFFFFFFFL;
  }

  /** Absolute position of a table field, or -1 when absent. */
  private int field(int table, int field) {
    int vtable = table - buf.getInt(table);
    int vtableSize = buf.getShort(vtable) & 0xFFFF;
    int slot = 4 + 2 * field;
    if (vtableSize < 4 || slot + 2 > vtableSize) {
      return -1;
    }
    int relative = buf.getShort(vtable + slot) & 0xFFFF;
    return relative == 0 ? -1 : table + relative;
  }

  private long u32Field(int table, int field) {
    int at = field(table, field);
    return at < 0 ? 0 : u32(at);
  }

  private long u64Field(int table, int field) {
    int at = field(table, field);
    return at < 0 ? 0 : buf.getLong(at);
  }

  /** Start and length of a vector field; length -1 when absent. */
  private int[] vector(int table, int field) {
    int at = field(table, field);
    if (at < 0) {
      return new int[] {0, -1};
    }
    int start = offsetAt(at);
    long length = u32(start);
    if (length > buf.capacity()) {
      throw new IllegalArgumentException("vector length " + length + " exceeds the file");
    }
    return new int[] {start + 4, (int) length};
  }

  private List<Integer> tableVector(int table, int field) {
    int[] vec = vector(table, field);
    List<Integer> out = new ArrayList<>();
    for (int i = 0; i < vec[1]; i++) {
      out.add(offsetAt(vec[0] + 4 * i));
    }
    return out;
  }

  private String string(int table, int field) {
    int[] vec = vector(table, field);
    if (vec[1] < 0) {
      return "";
    }
    byte[] bytes = new byte[vec[1]];
    ByteBuffer view = buf.duplicate();
    view.position(vec[0]);
    view.get(bytes);
    return new String(bytes, StandardCharsets.UTF_8);
  }

  private int[] bufferSpan(int root, long index, String name) throws ModelMetadataException {
    List<Integer> buffers = tableVector(root, MODEL_BUFFERS);
    if (index >= buffers.size()) {
      throw new ModelMetadataException("metadata entry \"" + name + "\" points to buffer " + index + " but the model has "
          + buffers.size() + " buffers");
    }
    int buffer = buffers.get((int) index);
    long offset = u64Field(buffer, BUFFER_OFFSET);
    if (offset > 1) {
      long size = u64Field(buffer, BUFFER_SIZE);
      if (size < 0 || offset + size > buf.capacity() || size > Integer.MAX_VALUE) {
        throw new ModelMetadataException("metadata entry \"" + name + "\": external buffer [" + offset + ", +" + size
            + ") lies outside the " + buf.capacity() + "-byte file");
      }
      return new int[] {(int) offset, (int) size};
    }
    int[] vec = vector(buffer, BUFFER_DATA);
    if (vec[1] < 0) {
      throw new ModelMetadataException("metadata entry \"" + name + "\" has an empty buffer");
    }
    return new int[] {vec[0], vec[1]};
  }

  private byte[] slice(int start, int length) {
    byte[] out = new byte[length];
    ByteBuffer view = buf.duplicate();
    view.position(start);
    view.get(out);
    return out;
  }
}
