package org.tflitetrain.core.json;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small strict RFC 8259 JSON parser with no dependencies.
 *
 * <p>Values map to Java as: object -> unmodifiable {@code Map<String, Object>} (insertion order,
 * duplicate keys rejected), array -> unmodifiable {@code List<Object>}, string -> {@link String},
 * integer without fraction/exponent -> {@link Long} (or {@link BigInteger} beyond 64 bits), other
 * numbers -> {@link Double}, true/false -> {@link Boolean}, null -> {@link #NULL}. Rejected: trailing
 * commas, leading zeros, NaN/Infinity, comments, unescaped control characters, lone surrogates,
 * trailing content, nesting deeper than {@link #MAX_DEPTH}.
 */
public final class Json {
  /** The JSON {@code null} value (so a present null differs from a missing key). */
  public static final Object NULL = new Object() {
    @Override
    public String toString() {
      return "null";
    }
  };

  /** Maximum nesting depth of arrays and objects. */
  public static final int MAX_DEPTH = 256;

  private final String text;
  private int pos;

  private Json(String text) {
    this.text = text;
  }

  /**
   * Parses one JSON value spanning the whole text (surrounding whitespace allowed).
   *
   * @throws JsonException for any syntax error, with the character offset
   */
  public static Object parse(String text) {
    if (text == null) {
      throw new JsonException("JSON text must not be null");
    }
    Json parser = new Json(text);
    parser.skipWhitespace();
    Object value = parser.readValue(0);
    parser.skipWhitespace();
    if (parser.pos != text.length()) {
      throw parser.error("unexpected trailing content");
    }
    return value;
  }

  private JsonException error(String message) {
    return new JsonException(message + " at offset " + pos);
  }

  private void skipWhitespace() {
    while (pos < text.length()) {
      char c = text.charAt(pos);
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        pos++;
      } else {
        return;
      }
    }
  }

  private Object readValue(int depth) {
    if (pos >= text.length()) {
      throw error("unexpected end of input");
    }
    char c = text.charAt(pos);
    switch (c) {
      case '{':
        return readObject(depth + 1);
      case '[':
        return readArray(depth + 1);
      case '"':
        return readString();
      case 't':
        return readLiteral("true", Boolean.TRUE);
      case 'f':
        return readLiteral("false", Boolean.FALSE);
      case 'n':
        return readLiteral("null", NULL);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          return readNumber();
        }
        throw error("unexpected character '" + c + "'");
    }
  }

  private Object readLiteral(String word, Object value) {
    if (!text.startsWith(word, pos)) {
      throw error("invalid literal");
    }
    pos += word.length();
    return value;
  }

  private Map<String, Object> readObject(int depth) {
    if (depth > MAX_DEPTH) {
      throw error("nesting deeper than " + MAX_DEPTH);
    }
    pos++; // '{'
    Map<String, Object> map = new LinkedHashMap<>();
    skipWhitespace();
    if (peek() == '}') {
      pos++;
      return Collections.unmodifiableMap(map);
    }
    while (true) {
      skipWhitespace();
      if (peek() != '"') {
        throw error("expected a string key");
      }
      String key = readString();
      skipWhitespace();
      expect(':');
      skipWhitespace();
      Object value = readValue(depth);
      if (map.containsKey(key)) {
        throw error("duplicate key \"" + key + "\"");
      }
      map.put(key, value);
      skipWhitespace();
      char c = next();
      if (c == '}') {
        return Collections.unmodifiableMap(map);
      }
      if (c != ',') {
        pos--;
        throw error("expected ',' or '}'");
      }
    }
  }

  private List<Object> readArray(int depth) {
    if (depth > MAX_DEPTH) {
      throw error("nesting deeper than " + MAX_DEPTH);
    }
    pos++; // '['
    List<Object> list = new ArrayList<>();
    skipWhitespace();
    if (peek() == ']') {
      pos++;
      return Collections.unmodifiableList(list);
    }
    while (true) {
      skipWhitespace();
      list.add(readValue(depth));
      skipWhitespace();
      char c = next();
      if (c == ']') {
        return Collections.unmodifiableList(list);
      }
      if (c != ',') {
        pos--;
        throw error("expected ',' or ']'");
      }
    }
  }

  private char peek() {
    if (pos >= text.length()) {
      throw error("unexpected end of input");
    }
    return text.charAt(pos);
  }

  private char next() {
    char c = peek();
    pos++;
    return c;
  }

  private void expect(char wanted) {
    if (next() != wanted) {
      pos--;
      throw error("expected '" + wanted + "'");
    }
  }

  private String readString() {
    pos++; // opening quote
    StringBuilder out = new StringBuilder();
    while (true) {
      char c = next();
      if (c == '"') {
        return out.toString();
      }
      if (c < 0x20) {
        pos--;
        throw error("unescaped control character in string");
      }
      if (c != '\\') {
        if (Character.isSurrogate(c)) {
          if (Character.isHighSurrogate(c) && pos < text.length()
              && Character.isLowSurrogate(text.charAt(pos))) {
            out.append(c).append(text.charAt(pos++));
            continue;
          }
          pos--;
          throw error("lone surrogate in string");
        }
        out.append(c);
        continue;
      }
      char e = next();
      switch (e) {
        case '"': out.append('"'); break;
        case '\\': out.append('\\'); break;
        case '/': out.append('/'); break;
        case 'b': out.append('\b'); break;
        case 'f': out.append('\f'); break;
        case 'n': out.append('\n'); break;
        case 'r': out.append('\r'); break;
        case 't': out.append('\t'); break;
        case 'u': {
          char unit = readHex4();
          if (Character.isHighSurrogate(unit)) {
            if (!text.startsWith("\\u", pos)) {
              throw error("high surrogate escape without a low surrogate");
            }
            pos += 2;
            char low = readHex4();
            if (!Character.isLowSurrogate(low)) {
              throw error("high surrogate escape without a low surrogate");
            }
            out.append(unit).append(low);
          } else if (Character.isLowSurrogate(unit)) {
            throw error("lone low surrogate escape");
          } else {
            out.append(unit);
          }
          break;
        }
        default:
          pos--;
          throw error("invalid escape '\\" + e + "'");
      }
    }
  }

  private char readHex4() {
    if (pos + 4 > text.length()) {
      throw error("truncated \\u escape");
    }
    int value = 0;
    for (int i = 0; i < 4; i++) {
      int digit = Character.digit(text.charAt(pos + i), 16);
      if (digit < 0) {
        throw error("invalid hex digit in \\u escape");
      }
      value = value * 16 + digit;
    }
    pos += 4;
    return (char) value;
  }

  private Object readNumber() {
    int start = pos;
    if (peek() == '-') {
      pos++;
    }
    char first = peek();
    if (first == '0') {
      pos++;
      if (pos < text.length() && isAsciiDigit(text.charAt(pos))) {
        throw error("leading zero in number");
      }
    } else if (first >= '1' && first <= '9') {
      skipDigits();
    } else {
      throw error("expected a digit");
    }
    boolean integral = true;
    if (pos < text.length() && text.charAt(pos) == '.') {
      integral = false;
      pos++;
      requireDigits();
    }
    if (pos < text.length() && (text.charAt(pos) == 'e' || text.charAt(pos) == 'E')) {
      integral = false;
      pos++;
      if (pos < text.length() && (text.charAt(pos) == '+' || text.charAt(pos) == '-')) {
        pos++;
      }
      requireDigits();
    }
    String literal = text.substring(start, pos);
    if (integral) {
      BigInteger big = new BigInteger(literal);
      return big.bitLength() < 64 ? (Object) big.longValue() : big;
    }
    double value = Double.parseDouble(literal);
    if (Double.isInfinite(value)) {
      pos = start;
      throw error("number out of double range");
    }
    return value;
  }

  private void requireDigits() {
    if (pos >= text.length() || !isAsciiDigit(text.charAt(pos))) {
      throw error("expected a digit");
    }
    skipDigits();
  }

  private static boolean isAsciiDigit(char c) {
    return c >= '0' && c <= '9';
  }

  private void skipDigits() {
    while (pos < text.length() && text.charAt(pos) >= '0' && text.charAt(pos) <= '9') {
      pos++;
    }
  }
}
