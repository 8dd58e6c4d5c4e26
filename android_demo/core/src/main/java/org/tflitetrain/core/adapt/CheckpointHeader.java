package org.tflitetrain.core.adapt;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.tflitetrain.core.json.Json;
import org.tflitetrain.core.model.Contract;

/**
 * The declared schema of a checkpoint header and its selection, checked field by field before any value
 * is used (the Java twin of {@code tflite_train/runtime/checkpoint/checkpoint_schema.py}): every field's JSON type,
 * range and length, no unknown or missing field, then the header's cross-field rules: the selection's
 * {@code channels} has exactly its {@code layers} as keys, each a strictly increasing non-empty list of
 * channel indices; array names are unique, each array's {@code nbytes} is its shape's element count x 4 and
 * lies within {@code payload_bytes}; {@code num_classes}, {@code prototypes} and {@code learning_rate} are
 * present with their contract dtype and rank. The optional replay section ({@link ReplaySection}, issue 42;
 * version 1 or 2) comes with exactly its arrays: {@code replay_activations} float32 [R >= 1, activation_shape...]
 * within its {@code budget_bytes}, {@code replay_labels} int32 [R] and, in version 2 only, {@code replay_images}
 * int32 [R]; a header without it has none of them. A failure is
 * a {@link CheckpointException} of one line:
 * "{@code <source>: checkpoint header field <path>: <problem>}".
 */
public final class CheckpointHeader {
  static final int MAX_ARRAYS = 100_000;
  static final int MAX_LAYERS = 10_000;
  static final int MAX_CLASSES = 100_000;
  static final int MAX_CHANNELS = 1 << 24;
  static final int MAX_NAME = 1024;
  static final int MAX_RANK = 8;
  static final long MAX_DIM = Integer.MAX_VALUE;
  static final long MAX_PAYLOAD_BYTES = 1L << 40;
  private static final Set<String> TOP = Set.of(Contract.F_FORMAT, Contract.F_FORMAT_VERSION, Contract.F_MODEL_ID,
      Contract.CK_SELECTION, Contract.CK_INCLUDE_OPTIMIZER, Contract.CK_CLASS_NAMES, Contract.CK_ARRAYS,
      Contract.CK_PAYLOAD_BYTES);
  private static final Set<String> OPTIONAL = Set.of(Contract.CHECKPOINT_CONFIG, Contract.CHECKPOINT_REPORT,
      Contract.CK_REPLAY);
  private static final Set<String> REPLAY = Set.of(Contract.F_FORMAT, Contract.F_FORMAT_VERSION, Contract.RP_CUT_LAYER,
      Contract.RP_CUT_INDEX, Contract.RP_ACTIVATION_SHAPE, Contract.RP_BUDGET_BYTES, Contract.F_RULE);
  private static final Set<String> SELECTION = Set.of(Contract.F_FORMAT, Contract.F_FORMAT_VERSION,
      Contract.SEL_POLICY, Contract.SEL_LAYERS, Contract.SEL_CHANNELS);
  private static final Set<String> ENTRY = Set.of(Contract.CK_NAME, Contract.CK_DTYPE, Contract.CK_SHAPE,
      Contract.CK_OFFSET, Contract.CK_NBYTES);

  /** One {@code arrays} entry. */
  public static final class ArrayEntry {
    public final String name;
    public final String dtype;
    public final int[] shape;
    public final long offset;
    public final long nbytes;

    ArrayEntry(String name, String dtype, int[] shape, long offset, long nbytes) {
      this.name = name;
      this.dtype = dtype;
      this.shape = shape;
      this.offset = offset;
      this.nbytes = nbytes;
    }
  }

  /** The replay section's fields (its arrays are in the payload). */
  public static final class ReplaySection {
    public final String cutLayer;
    public final int cutIndex;
    private final int[] shape;
    public final long budgetBytes;
    /** The section's {@code format_version}: 1 (one plain view per row) or 2 (with {@code replay_images}). */
    public final int version;

    ReplaySection(String cutLayer, int cutIndex, int[] shape, long budgetBytes, int version) {
      this.cutLayer = cutLayer;
      this.cutIndex = cutIndex;
      this.shape = shape;
      this.budgetBytes = budgetBytes;
      this.version = version;
    }

    /** One activation's shape, without the batch. */
    public int[] shape() {
      return shape.clone();
    }
  }

  public final String modelId;
  public final String policy;
  /** Selected layer -> strictly increasing channel indices, in the header's {@code layers} order. */
  public final Map<String, int[]> channels;
  public final boolean includeOptimizer;
  public final List<String> classNames;
  public final List<ArrayEntry> arrays;
  public final long payloadBytes;
  /** The replay section, or null. */
  public final ReplaySection replay;

  private CheckpointHeader(String modelId, String policy, Map<String, int[]> channels, boolean includeOptimizer,
      List<String> classNames, List<ArrayEntry> arrays, long payloadBytes, ReplaySection replay) {
    this.modelId = modelId;
    this.policy = policy;
    this.channels = Collections.unmodifiableMap(channels);
    this.includeOptimizer = includeOptimizer;
    this.classNames = Collections.unmodifiableList(classNames);
    this.arrays = Collections.unmodifiableList(arrays);
    this.payloadBytes = payloadBytes;
    this.replay = replay;
  }

  /**
   * Checks a parsed header ({@link Json#parse}) against the schema.
   *
   * @throws CheckpointException the first field that does not fit, named by its path
   */
  public static CheckpointHeader check(Object parsed, String source) throws CheckpointException {
    Fields f = new Fields(source);
    Map<?, ?> header = f.object(parsed, "header");
    f.keys(header, "", TOP, OPTIONAL);
    f.constant(header.get(Contract.F_FORMAT), Contract.F_FORMAT, Contract.CHECKPOINT_FORMAT);
    f.constant(header.get(Contract.F_FORMAT_VERSION), Contract.F_FORMAT_VERSION, (long) Contract.CHECKPOINT_FORMAT_VERSION);
    String modelId = f.string(header.get(Contract.F_MODEL_ID), Contract.F_MODEL_ID, 1);
    Map<?, ?> sel = f.object(header.get(Contract.CK_SELECTION), Contract.CK_SELECTION);
    String selPath = Contract.CK_SELECTION;
    f.keys(sel, selPath + ".", SELECTION, Set.of());
    f.constant(sel.get(Contract.F_FORMAT), selPath + "." + Contract.F_FORMAT, Contract.SELECTION_FORMAT);
    f.constant(sel.get(Contract.F_FORMAT_VERSION), selPath + "." + Contract.F_FORMAT_VERSION,
        (long) Contract.SELECTION_FORMAT_VERSION);
    String policy = f.string(sel.get(Contract.SEL_POLICY), selPath + "." + Contract.SEL_POLICY, 0);
    List<?> layers = f.list(sel.get(Contract.SEL_LAYERS), selPath + "." + Contract.SEL_LAYERS, MAX_LAYERS);
    List<String> layerNames = new ArrayList<>();
    for (int i = 0; i < layers.size(); i++) {
      String name = f.string(layers.get(i), selPath + "." + Contract.SEL_LAYERS + "[" + i + "]", 1);
      if (layerNames.contains(name)) {
        throw f.error(selPath + "." + Contract.SEL_LAYERS, "must not repeat an item; \"" + name + "\" appears twice");
      }
      layerNames.add(name);
    }
    String chPath = selPath + "." + Contract.SEL_CHANNELS;
    Object rawChannels = sel.get(Contract.SEL_CHANNELS);
    if (!(rawChannels instanceof Map)) {
      throw f.error(chPath, "must be an object of name -> a list of integers; got " + Fields.describe(rawChannels));
    }
    Map<?, ?> channelMap = (Map<?, ?>) rawChannels;
    for (Object key : channelMap.keySet()) {
      if (!layerNames.contains(key)) {
        throw f.error(chPath, "names layer \"" + key + "\", which is not in " + Contract.SEL_LAYERS);
      }
    }
    Map<String, int[]> channels = new LinkedHashMap<>();
    for (String layer : layerNames) {
      if (!channelMap.containsKey(layer)) {
        throw f.error(chPath, "lacks the selected layer \"" + layer + "\"");
      }
      String where = chPath + "['" + layer + "']";
      List<?> values = f.list(channelMap.get(layer), where, MAX_CHANNELS);
      if (values.isEmpty()) {
        throw f.error(where, "must have 1.." + MAX_CHANNELS + " items; got 0");
      }
      int[] idx = new int[values.size()];
      for (int i = 0; i < idx.length; i++) {
        idx[i] = (int) f.integer(values.get(i), where + "[" + i + "]", 0, MAX_CHANNELS - 1);
        if (i > 0 && idx[i] <= idx[i - 1]) {
          throw f.error(where + "[" + i + "]", "must be sorted and unique; " + idx[i] + " follows " + idx[i - 1]);
        }
      }
      channels.put(layer, idx);
    }
    boolean includeOptimizer = f.bool(header.get(Contract.CK_INCLUDE_OPTIMIZER), Contract.CK_INCLUDE_OPTIMIZER);
    List<?> names = f.list(header.get(Contract.CK_CLASS_NAMES), Contract.CK_CLASS_NAMES, MAX_CLASSES);
    List<String> classNames = new ArrayList<>();
    for (int i = 0; i < names.size(); i++) {
      classNames.add(f.string(names.get(i), Contract.CK_CLASS_NAMES + "[" + i + "]", 0));
    }
    long payload = f.integer(header.get(Contract.CK_PAYLOAD_BYTES), Contract.CK_PAYLOAD_BYTES, 0, MAX_PAYLOAD_BYTES);
    List<?> entries = f.list(header.get(Contract.CK_ARRAYS), Contract.CK_ARRAYS, MAX_ARRAYS);
    List<ArrayEntry> arrays = new ArrayList<>();
    Map<String, ArrayEntry> byName = new LinkedHashMap<>();
    for (int i = 0; i < entries.size(); i++) {
      String at = Contract.CK_ARRAYS + "[" + i + "]";
      Map<?, ?> entry = f.object(entries.get(i), at);
      f.keys(entry, at + ".", ENTRY, Set.of());
      String name = f.string(entry.get(Contract.CK_NAME), at + "." + Contract.CK_NAME, 1);
      Object dtype = entry.get(Contract.CK_DTYPE);
      if (!"float32".equals(dtype) && !"int32".equals(dtype)) {
        throw f.error(at + "." + Contract.CK_DTYPE, "must be one of float32, int32; got " + Fields.describe(dtype));
      }
      List<?> dims = f.list(entry.get(Contract.CK_SHAPE), at + "." + Contract.CK_SHAPE, MAX_RANK);
      int[] shape = new int[dims.size()];
      long count = 1;
      for (int d = 0; d < shape.length; d++) {
        shape[d] = (int) f.integer(dims.get(d), at + "." + Contract.CK_SHAPE + "[" + d + "]", 0, MAX_DIM);
        count = count > MAX_PAYLOAD_BYTES ? count : count * shape[d];
      }
      long offset = f.integer(entry.get(Contract.CK_OFFSET), at + "." + Contract.CK_OFFSET, 0, MAX_PAYLOAD_BYTES);
      long nbytes = f.integer(entry.get(Contract.CK_NBYTES), at + "." + Contract.CK_NBYTES, 0, MAX_PAYLOAD_BYTES);
      if (byName.containsKey(name)) {
        throw f.error(at + "." + Contract.CK_NAME, "repeats the array \"" + name + "\"");
      }
      if (count > MAX_PAYLOAD_BYTES || nbytes != 4 * count) {
        throw f.error(at + "." + Contract.CK_NBYTES, "is " + nbytes + " but shape " + java.util.Arrays.toString(shape)
            + " of " + dtype + " takes " + (count > MAX_PAYLOAD_BYTES ? "more" : String.valueOf(4 * count)) + " bytes");
      }
      if (offset + nbytes > payload) {
        throw f.error(at + "." + Contract.CK_OFFSET, "array \"" + name + "\" ends at byte " + (offset + nbytes)
            + ", beyond " + Contract.CK_PAYLOAD_BYTES + " " + payload);
      }
      ArrayEntry parsedEntry = new ArrayEntry(name, (String) dtype, shape, offset, nbytes);
      byName.put(name, parsedEntry);
      arrays.add(parsedEntry);
    }
    requireArray(f, byName, Contract.NUM_CLASSES, "int32", 0);
    requireArray(f, byName, Contract.PROTOTYPES, "float32", 2);
    requireArray(f, byName, Contract.LEARNING_RATE, "float32", 0);
    for (String key : List.of(Contract.CHECKPOINT_CONFIG, Contract.CHECKPOINT_REPORT)) {
      Object document = header.get(key);
      if (header.containsKey(key) && document != Json.NULL && !(document instanceof Map)) {
        throw f.error(key, "must be an object; got " + Fields.describe(document));
      }
    }
    ReplaySection replay = header.containsKey(Contract.CK_REPLAY) ? replay(f, header.get(Contract.CK_REPLAY)) : null;
    replayRules(f, replay, byName);
    return new CheckpointHeader(modelId, policy, channels, includeOptimizer, classNames, arrays, payload, replay);
  }

  /** The replay section's fields (Python's {@code checkpoint_schema.REPLAY}). */
  private static ReplaySection replay(Fields f, Object value) throws CheckpointException {
    String at = Contract.CK_REPLAY;
    Map<?, ?> section = f.object(value, at);
    f.keys(section, at + ".", REPLAY, Set.of());
    f.constant(section.get(Contract.F_FORMAT), at + "." + Contract.F_FORMAT, Contract.REPLAY_FORMAT);
    int version = (int) f.integer(section.get(Contract.F_FORMAT_VERSION), at + "." + Contract.F_FORMAT_VERSION,
        Contract.REPLAY_FORMAT_VERSION_ONE_VIEW, Contract.REPLAY_FORMAT_VERSION);
    String layer = f.string(section.get(Contract.RP_CUT_LAYER), at + "." + Contract.RP_CUT_LAYER, 1);
    int index = (int) f.integer(section.get(Contract.RP_CUT_INDEX), at + "." + Contract.RP_CUT_INDEX, 0, MAX_LAYERS);
    String shapeAt = at + "." + Contract.RP_ACTIVATION_SHAPE;
    List<?> dims = f.list(section.get(Contract.RP_ACTIVATION_SHAPE), shapeAt, MAX_RANK - 1);
    if (dims.isEmpty()) {
      throw f.error(shapeAt, "must have 1.." + (MAX_RANK - 1) + " items; got 0");
    }
    int[] shape = new int[dims.size()];
    for (int d = 0; d < shape.length; d++) {
      shape[d] = (int) f.integer(dims.get(d), shapeAt + "[" + d + "]", 1, MAX_DIM);
    }
    long budget = f.integer(section.get(Contract.RP_BUDGET_BYTES), at + "." + Contract.RP_BUDGET_BYTES, 0,
        MAX_PAYLOAD_BYTES);
    if (!Contract.REPLAY_RULE.equals(section.get(Contract.F_RULE))) {
      throw f.error(at + "." + Contract.F_RULE, "must be one of " + Contract.REPLAY_RULE + "; got "
          + Fields.describe(section.get(Contract.F_RULE)));
    }
    return new ReplaySection(layer, index, shape, budget, version);
  }

  /** The replay section and its arrays agree (Python's {@code checkpoint_schema._replay_rules}). */
  private static void replayRules(Fields f, ReplaySection replay, Map<String, ArrayEntry> byName)
      throws CheckpointException {
    List<String> names = List.of(Contract.REPLAY_ACTIVATIONS, Contract.REPLAY_LABELS, Contract.REPLAY_IMAGES);
    if (replay == null) {
      for (String name : names) {
        if (byName.containsKey(name)) {
          throw f.error(Contract.CK_ARRAYS + "['" + name + "']", "is replay data without the header field "
              + Contract.CK_REPLAY);
        }
      }
      return;
    }
    for (String name : names) {
      boolean wanted = !name.equals(Contract.REPLAY_IMAGES) || replay.version >= 2;
      if (wanted && !byName.containsKey(name)) {
        throw f.error(Contract.CK_ARRAYS, "has no '" + name + "' array for the header field " + Contract.CK_REPLAY
            + " (version " + replay.version + ")");
      }
      if (!wanted && byName.containsKey(name)) {
        throw f.error(Contract.CK_ARRAYS + "['" + name + "']", "is not part of a " + Contract.CK_REPLAY
            + " section of version " + replay.version);
      }
    }
    ArrayEntry activations = byName.get(Contract.REPLAY_ACTIVATIONS);
    ArrayEntry labels = byName.get(Contract.REPLAY_LABELS);
    int rows = activations.shape.length == 0 ? 0 : activations.shape[0];
    String where = Contract.CK_ARRAYS + "['" + Contract.REPLAY_ACTIVATIONS + "']";
    if (!"float32".equals(activations.dtype) || rows < 1 || !java.util.Arrays.equals(
        java.util.Arrays.copyOfRange(activations.shape, 1, activations.shape.length), replay.shape)) {
      throw f.error(where, "must be float32 [R >= 1, " + join(replay.shape) + "] (" + Contract.CK_REPLAY + "."
          + Contract.RP_ACTIVATION_SHAPE + "); got " + activations.dtype + " "
          + java.util.Arrays.toString(activations.shape));
    }
    if (activations.nbytes > replay.budgetBytes) {
      throw f.error(where, "takes " + activations.nbytes + " bytes, over " + Contract.CK_REPLAY + "."
          + Contract.RP_BUDGET_BYTES + " " + replay.budgetBytes);
    }
    if (!"int32".equals(labels.dtype) || !java.util.Arrays.equals(labels.shape, new int[] {rows})) {
      throw f.error(Contract.CK_ARRAYS + "['" + Contract.REPLAY_LABELS + "']", "must be int32 [" + rows
          + "] (one class per stored activation); got " + labels.dtype + " " + java.util.Arrays.toString(labels.shape));
    }
    ArrayEntry images = byName.get(Contract.REPLAY_IMAGES);
    if (images != null && (!"int32".equals(images.dtype) || !java.util.Arrays.equals(images.shape, new int[] {rows}))) {
      throw f.error(Contract.CK_ARRAYS + "['" + Contract.REPLAY_IMAGES + "']", "must be int32 [" + rows
          + "] (one image per stored activation); got " + images.dtype + " " + java.util.Arrays.toString(images.shape));
    }
  }

  private static String join(int[] values) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < values.length; i++) {
      b.append(i > 0 ? ", " : "").append(values[i]);
    }
    return b.toString();
  }

  private static void requireArray(Fields f, Map<String, ArrayEntry> byName, String name, String dtype, int rank)
      throws CheckpointException {
    ArrayEntry entry = byName.get(name);
    if (entry == null) {
      throw f.error(Contract.CK_ARRAYS, "has no \"" + name + "\" array");
    }
    if (!entry.dtype.equals(dtype) || entry.shape.length != rank) {
      throw f.error(Contract.CK_ARRAYS + "['" + name + "']", "must be " + dtype + " of rank " + rank + "; got "
          + entry.dtype + " " + java.util.Arrays.toString(entry.shape));
    }
  }

  /** Typed access that names the field in every failure. */
  private static final class Fields {
    private final String source;

    Fields(String source) {
      this.source = source;
    }

    CheckpointException error(String path, String problem) {
      return new CheckpointException(source + ": checkpoint header field " + path + ": " + problem);
    }

    Map<?, ?> object(Object value, String path) throws CheckpointException {
      if (!(value instanceof Map)) {
        throw error(path, "must be an object; got " + describe(value));
      }
      return (Map<?, ?>) value;
    }

    void keys(Map<?, ?> map, String prefix, Set<String> required, Set<String> optional) throws CheckpointException {
      for (String key : required) {
        if (!map.containsKey(key)) {
          throw error(prefix + key, "is missing");
        }
      }
      Set<Object> unknown = new HashSet<>(map.keySet());
      unknown.removeAll(required);
      unknown.removeAll(optional);
      if (!unknown.isEmpty()) {
        throw error(prefix + unknown.stream().map(String::valueOf).sorted().findFirst().get(), "is not a known field");
      }
    }

    void constant(Object value, String path, Object expected) throws CheckpointException {
      if (!expected.equals(value)) {
        throw error(path, "must be " + describe(expected) + "; got " + describe(value));
      }
    }

    String string(Object value, String path, int minLength) throws CheckpointException {
      if (!(value instanceof String)) {
        throw error(path, "must be a string; got " + describe(value));
      }
      String text = (String) value;
      if (text.length() < minLength || text.length() > MAX_NAME) {
        throw error(path, "must have " + minLength + ".." + MAX_NAME + " characters; got " + text.length());
      }
      return text;
    }

    boolean bool(Object value, String path) throws CheckpointException {
      if (!(value instanceof Boolean)) {
        throw error(path, "must be true or false; got " + describe(value));
      }
      return (Boolean) value;
    }

    long integer(Object value, String path, long min, long max) throws CheckpointException {
      if (value instanceof BigInteger) {
        throw error(path, "must be in " + min + ".." + max + "; got " + value);
      }
      if (!(value instanceof Long)) {
        throw error(path, "must be an integer; got " + describe(value));
      }
      long v = (Long) value;
      if (v < min || v > max) {
        throw error(path, "must be in " + min + ".." + max + "; got " + v);
      }
      return v;
    }

    List<?> list(Object value, String path, int maxLength) throws CheckpointException {
      if (!(value instanceof List)) {
        throw error(path, "must be a list; got " + describe(value));
      }
      List<?> list = (List<?>) value;
      if (list.size() > maxLength) {
        throw error(path, "must have 0.." + maxLength + " items; got " + list.size());
      }
      return list;
    }

    static String describe(Object value) {
      if (value == null || value == Json.NULL) {
        return "null";
      }
      if (value instanceof String) {
        String s = (String) value;
        return "a string '" + (s.length() > 60 ? s.substring(0, 60) + "..." : s) + "'";
      }
      if (value instanceof Map) {
        return "an object";
      }
      if (value instanceof List) {
        return "a list";
      }
      return String.valueOf(value);
    }
  }
}
