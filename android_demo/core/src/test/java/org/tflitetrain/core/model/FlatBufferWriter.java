package org.tflitetrain.core.model;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A minimal forward-writing flatbuffer writer for tests: objects are appended in order and
 * offsets patched, so every uoffset points forward as the format requires. Each table gets its own
 * vtable written just before it (or shares one, to test vtable sharing).
 */
final class FlatBufferWriter {
  private ByteBuffer buf = ByteBuffer.allocate(1 << 16).order(ByteOrder.LITTLE_ENDIAN);
  private int end;

  /** A table: its position and the absolute position of each field (-1 = absent). */
  static final class Table {
    final int pos;
    final int[] fields;

    Table(int pos, int[] fields) {
      this.pos = pos;
      this.fields = fields;
    }
  }

  FlatBufferWriter() {
    end = 8; // root uoffset + file identifier
    buf.put(4, (byte) 'T').put(5, (byte) 'F').put(6, (byte) 'L').put(7, (byte) '3');
  }

  void identifier(String id) {
    byte[] b = id.getBytes(StandardCharsets.ISO_8859_1);
    for (int i = 0; i < 4; i++) {
      buf.put(4 + i, b[i]);
    }
  }

  private void align(int n) {
    while (end % n != 0) {
      end++;
    }
  }

  /** Writes a vtable for fields of the given sizes (0 = absent) plus the table; returns it. */
  Table table(int... sizes) {
    align(2);
    int vtable = end;
    int vtableSize = 4 + 2 * sizes.length;
    end += vtableSize;
    align(8);
    if (end % 8 == 0) {
      end += 4; // so that fields after the 4-byte soffset are 8-aligned
    }
    int table = end;
    int[] fields = new int[sizes.length];
    int cursor = table + 4;
    for (int i = 0; i < sizes.length; i++) {
      if (sizes[i] == 0) {
        fields[i] = -1;
        continue;
      }
      while (cursor % sizes[i] != 0) {
        cursor++;
      }
      fields[i] = cursor;
      cursor += sizes[i];
    }
    buf.putShort(vtable, (short) vtableSize);
    buf.putShort(vtable + 2, (short) (cursor - table));
    for (int i = 0; i < sizes.length; i++) {
      buf.putShort(vtable + 4 + 2 * i, (short) (fields[i] < 0 ? 0 : fields[i] - table));
    }
    buf.putInt(table, table - vtable);
    end = cursor;
    return new Table(table, fields);
  }

  /** Writes a table that reuses the vtable of {@code shared} (same field layout). */
  Table tableSharingVtable(Table shared) {
    align(4);
    int table = end;
    int vtable = shared.pos - buf.getInt(shared.pos);
    int tableSize = buf.getShort(vtable + 2);
    buf.putInt(table, table - vtable);
    int[] fields = new int[shared.fields.length];
    for (int i = 0; i < fields.length; i++) {
      fields[i] = shared.fields[i] < 0 ? -1 : table + (shared.fields[i] - shared.pos);
    }
    end = table + tableSize;
    while (end % 8 != 0) {
      end++;
    }
    return new Table(table, fields);
  }

  void u32(int at, long value) {
    buf.putInt(at, (int) value);
  }

  void u64(int at, long value) {
    buf.putLong(at, value);
  }

  /** Stores at {@code at} the uoffset to {@code target}. */
  void link(int at, int target) {
    if (target <= at) {
      throw new IllegalStateException("uoffsets must point forward");
    }
    buf.putInt(at, target - at);
  }

  void root(Table table) {
    link(0, table.pos);
  }

  int string(String s) {
    byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
    int at = bytes(bytes);
    buf.put(end++, (byte) 0);
    return at;
  }

  int bytes(byte[] data) {
    align(4);
    int at = end;
    buf.putInt(at, data.length);
    for (int i = 0; i < data.length; i++) {
      buf.put(at + 4 + i, data[i]);
    }
    end = at + 4 + data.length;
    return at;
  }

  /** A vector of n offsets; returns its position (element i is at pos + 4 + 4 i). */
  int offsetVector(int n) {
    align(4);
    int at = end;
    buf.putInt(at, n);
    end = at + 4 + 4 * n;
    return at;
  }

  int position() {
    return end;
  }

  /** Appends raw bytes after the flatbuffer (the large-model external-buffer layout). */
  int appendRaw(byte[] data) {
    align(16);
    int at = end;
    for (int i = 0; i < data.length; i++) {
      buf.put(at + i, data[i]);
    }
    end = at + data.length;
    return at;
  }

  byte[] finish() {
    return Arrays.copyOf(buf.array(), end);
  }
}
