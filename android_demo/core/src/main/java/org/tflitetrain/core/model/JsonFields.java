package org.tflitetrain.core.model;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.tflitetrain.core.json.Json;

/** Typed, path-naming access to one parsed JSON object; every failure is a {@link ModelMetadataException}. */
final class JsonFields {
  private final Map<String, Object> map;
  private final String path;

  private JsonFields(Map<String, Object> map, String path) {
    this.map = map;
    this.path = path;
  }

  static JsonFields of(Object value, String path) throws ModelMetadataException {
    if (!(value instanceof Map)) {
      throw new ModelMetadataException(path + " must be a JSON object; got " + describe(value));
    }
    @SuppressWarnings("unchecked")
    Map<String, Object> map = (Map<String, Object>) value;
    return new JsonFields(map, path);
  }

  String path(String key) {
    return path.isEmpty() ? key : path + "." + key;
  }

  boolean has(String key) {
    return map.containsKey(key) && map.get(key) != Json.NULL;
  }

  Object require(String key) throws ModelMetadataException {
    if (!map.containsKey(key)) {
      throw new ModelMetadataException("missing key " + path(key));
    }
    return map.get(key);
  }

  JsonFields object(String key) throws ModelMetadataException {
    return of(require(key), path(key));
  }

  String string(String key) throws ModelMetadataException {
    Object value = require(key);
    if (!(value instanceof String)) {
      throw new ModelMetadataException(path(key) + " must be a string; got " + describe(value));
    }
    return (String) value;
  }

  boolean bool(String key) throws ModelMetadataException {
    Object value = require(key);
    if (!(value instanceof Boolean)) {
      throw new ModelMetadataException(path(key) + " must be true or false; got " + describe(value));
    }
    return (Boolean) value;
  }

  long integer(String key) throws ModelMetadataException {
    return asLong(require(key), path(key));
  }

  int integer(String key, long min, long max) throws ModelMetadataException {
    long value = integer(key);
    if (value < min || value > max) {
      throw new ModelMetadataException(path(key) + " must be in " + min + ".." + max + "; got " + value);
    }
    return (int) value;
  }

  double number(String key) throws ModelMetadataException {
    return asDouble(require(key), path(key));
  }

  List<Object> array(String key) throws ModelMetadataException {
    Object value = require(key);
    if (!(value instanceof List)) {
      throw new ModelMetadataException(path(key) + " must be an array; got " + describe(value));
    }
    @SuppressWarnings("unchecked")
    List<Object> list = (List<Object>) value;
    return list;
  }

  List<Double> numbers(String key) throws ModelMetadataException {
    List<Double> out = new ArrayList<>();
    List<Object> values = array(key);
    for (int i = 0; i < values.size(); i++) {
      out.add(asDouble(values.get(i), path(key) + "[" + i + "]"));
    }
    return out;
  }

  static long asLong(Object value, String where) throws ModelMetadataException {
    if (value instanceof Long) {
      return (Long) value;
    }
    if (value instanceof BigInteger) {
      throw new ModelMetadataException(where + " is out of the 64-bit range: " + value);
    }
    throw new ModelMetadataException(where + " must be an integer; got " + describe(value));
  }

  static double asDouble(Object value, String where) throws ModelMetadataException {
    if (value instanceof Long) {
      return ((Long) value).doubleValue();
    }
    if (value instanceof Double) {
      return (Double) value;
    }
    throw new ModelMetadataException(where + " must be a number; got " + describe(value));
  }

  static String describe(Object value) {
    if (value == null || value == Json.NULL) {
      return "null";
    }
    if (value instanceof String) {
      return "\"" + value + "\"";
    }
    if (value instanceof Map) {
      return "an object";
    }
    if (value instanceof List) {
      return "an array";
    }
    return value.toString();
  }
}
