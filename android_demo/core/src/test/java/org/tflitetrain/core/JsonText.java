package org.tflitetrain.core;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.tflitetrain.core.json.Json;

/**
 * Writes the values {@link Json#parse} returns back as JSON text, so tests can edit parsed metadata
 * (add or drop a field) and hand the result to a parser. Numbers are written with Java's
 * {@code toString} (exact for {@link Long}; shortest round-trip for {@link Double}).
 */
public final class JsonText {
  private JsonText() {}

  /** JSON text of a parsed value (maps, lists, strings, numbers, booleans, {@link Json#NULL}). */
  public static String write(Object value) {
    StringBuilder out = new StringBuilder();
    write(value, out);
    return out.toString();
  }

  /** A mutable copy of a parsed JSON object (the parser's maps are unmodifiable). */
  public static Map<String, Object> mutable(Object object) {
    return new LinkedHashMap<>(Resources.obj(object));
  }

  private static void write(Object value, StringBuilder out) {
    if (value == null || value == Json.NULL) {
      out.append("null");
    } else if (value instanceof String) {
      quote((String) value, out);
    } else if (value instanceof Map) {
      out.append('{');
      Iterator<? extends Map.Entry<?, ?>> entries = ((Map<?, ?>) value).entrySet().iterator();
      while (entries.hasNext()) {
        Map.Entry<?, ?> entry = entries.next();
        quote((String) entry.getKey(), out);
        out.append(": ");
        write(entry.getValue(), out);
        out.append(entries.hasNext() ? ", " : "");
      }
      out.append('}');
    } else if (value instanceof List) {
      out.append('[');
      List<?> items = (List<?>) value;
      for (int i = 0; i < items.size(); i++) {
        write(items.get(i), out);
        out.append(i + 1 < items.size() ? ", " : "");
      }
      out.append(']');
    } else if (value instanceof Number || value instanceof Boolean) {
      out.append(value);
    } else {
      throw new IllegalArgumentException("not a JSON value: " + value.getClass().getName());
    }
  }

  private static void quote(String s, StringBuilder out) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    out.append('"');
  }
}
