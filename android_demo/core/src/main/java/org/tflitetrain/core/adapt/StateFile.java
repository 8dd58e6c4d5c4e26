package org.tflitetrain.core.adapt;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Binary file of named tensors from {@code get_state}, tied to one model by its {@code model_id}.
 *
 * <p>Layout (big-endian, java.io.DataOutput): magic "TTST", u32 version (1), UTF model_id, u32 count,
 * then per tensor: UTF name, u8 dtype (0 f32, 1 i32, 2 i64), u32 rank, rank x u32 dims, the elements.
 */
public final class StateFile {
  private static final int MAGIC = 0x54545354; // "TTST"
  private static final int VERSION = 1;
  private static final int MAX_ELEMENTS = 1 << 28;

  private StateFile() {}

  /** Writes {@code state} for model {@code modelId}. */
  public static void write(OutputStream stream, String modelId, Map<String, Tensor> state) throws IOException {
    DataOutputStream out = new DataOutputStream(stream);
    out.writeInt(MAGIC);
    out.writeInt(VERSION);
    out.writeUTF(modelId);
    out.writeInt(state.size());
    for (Map.Entry<String, Tensor> entry : state.entrySet()) {
      Tensor tensor = entry.getValue();
      out.writeUTF(entry.getKey());
      out.writeByte(tensor.dtype.ordinal());
      int[] shape = tensor.shape();
      out.writeInt(shape.length);
      for (int d : shape) {
        out.writeInt(d);
      }
      switch (tensor.dtype) {
        case FLOAT32:
          for (float v : tensor.floats()) {
            out.writeFloat(v);
          }
          break;
        case INT32:
          for (int v : tensor.ints()) {
            out.writeInt(v);
          }
          break;
        default:
          for (long v : tensor.longs()) {
            out.writeLong(v);
          }
      }
    }
    out.flush();
  }

  /**
   * Reads a state file written for {@code expectedModelId}.
   *
   * @throws IOException for a foreign/corrupt file or one saved for another model
   */
  public static Map<String, Tensor> read(InputStream stream, String expectedModelId) throws IOException {
    DataInputStream in = new DataInputStream(stream);
    if (in.readInt() != MAGIC) {
      throw new IOException("not a tflite-train state file (bad magic)");
    }
    int version = in.readInt();
    if (version != VERSION) {
      throw new IOException("unsupported state file version " + version + "; expected " + VERSION);
    }
    String modelId = in.readUTF();
    if (!modelId.equals(expectedModelId)) {
      throw new IOException("state was saved for model " + modelId + ", not for the loaded model " + expectedModelId);
    }
    int count = in.readInt();
    if (count < 0 || count > 100_000) {
      throw new IOException("corrupt state file: " + count + " tensors");
    }
    Map<String, Tensor> state = new LinkedHashMap<>();
    for (int t = 0; t < count; t++) {
      String name = in.readUTF();
      int dtype = in.readUnsignedByte();
      if (dtype >= Tensor.DType.values().length) {
        throw new IOException("corrupt state file: dtype " + dtype + " for tensor " + name);
      }
      int rank = in.readInt();
      if (rank < 0 || rank > 8) {
        throw new IOException("corrupt state file: rank " + rank + " for tensor " + name);
      }
      int[] shape = new int[rank];
      long elements = 1;
      for (int i = 0; i < rank; i++) {
        shape[i] = in.readInt();
        if (shape[i] < 0) {
          throw new IOException("corrupt state file: negative dimension for tensor " + name);
        }
        elements *= shape[i];
        if (elements > MAX_ELEMENTS) {
          throw new IOException("corrupt state file: tensor " + name + " too large");
        }
      }
      int size = (int) elements;
      switch (Tensor.DType.values()[dtype]) {
        case FLOAT32: {
          float[] data = new float[size];
          for (int i = 0; i < size; i++) {
            data[i] = in.readFloat();
          }
          state.put(name, Tensor.ofFloats(shape, data));
          break;
        }
        case INT32: {
          int[] data = new int[size];
          for (int i = 0; i < size; i++) {
            data[i] = in.readInt();
          }
          state.put(name, Tensor.ofInts(shape, data));
          break;
        }
        default: {
          long[] data = new long[size];
          for (int i = 0; i < size; i++) {
            data[i] = in.readLong();
          }
          state.put(name, Tensor.ofLongs(shape, data));
        }
      }
    }
    if (in.read() != -1) {
      throw new IOException("corrupt state file: trailing bytes");
    }
    return state;
  }
}
