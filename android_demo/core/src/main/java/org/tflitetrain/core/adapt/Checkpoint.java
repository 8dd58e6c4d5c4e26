package org.tflitetrain.core.adapt;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.tflitetrain.core.adapt.CheckpointHeader.ReplaySection;
import org.tflitetrain.core.json.Json;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.ModelMetadata;

/**
 * The checkpoint file shared with Python ({@code tflite_train/runtime/checkpoint/checkpoint.py}, CONTRACT.md):
 * little-endian magic "TFLTCKPT", u32 version 1, u32 header length, UTF-8 JSON header (format, format_version,
 * model_id, selection, include_optimizer, class_names, arrays [{name, dtype, shape, offset, nbytes}],
 * payload_bytes), the arrays' C-order bytes, then the sha256 of everything before it.
 *
 * <p>Arrays: {@code prototypes} [k, D], {@code num_classes}, {@code learning_rate}; per selected layer the
 * selected output channels of its kernel (depthwise [k, k, C, 1]: axis 2, else the last axis) and bias; with
 * the optimizer, the same slices of the slots and {@code step}. Restoring = the exported state + these slices
 * + the selection mask, only for the model whose {@code model_id} the file names. The optional replay section
 * ({@link ReplayMemory}, issue 42) adds {@code replay_activations}, {@code replay_labels} and (its version 2, which
 * this class writes) {@code replay_images}; a version-1 section (no {@code replay_images}: one plain view per row)
 * is still read. Read into {@link #replay}, never into the state. {@link #encode()} writes a decoded checkpoint back byte for byte (golden
 * {@code checkpoint_replay.json}).
 */
public final class Checkpoint {
  public static final String FORMAT = Contract.CHECKPOINT_FORMAT;
  public static final int VERSION = Contract.CHECKPOINT_FORMAT_VERSION;
  private static final byte[] MAGIC = Contract.CHECKPOINT_MAGIC.getBytes(StandardCharsets.US_ASCII);
  private static final int PREFIX = 16;
  private static final int DIGEST = 32;

  public final String modelId;
  public final Map<String, int[]> selection;
  public final String policy;
  public final boolean includeOptimizer;
  public final Map<String, Tensor> arrays;
  public final List<String> classNames;
  /** The replay memory (its arrays are not in {@link #arrays}), or null. */
  public final ReplayMemory replay;

  private Checkpoint(String modelId, Map<String, int[]> selection, String policy, boolean includeOptimizer,
      Map<String, Tensor> arrays, List<String> classNames, ReplayMemory replay) {
    this.modelId = modelId;
    this.selection = selection;
    this.policy = policy;
    this.includeOptimizer = includeOptimizer;
    this.arrays = arrays;
    this.classNames = classNames;
    this.replay = replay;
  }

  /** The checkpoint bytes of an adapted {@code state} (from {@code get_state}) under {@code selection}. */
  public static byte[] encode(ModelMetadata m, Map<String, Tensor> state, Selection selection, String policy,
      boolean includeOptimizer, List<String> classNames) {
    return encode(m, state, selection, policy, includeOptimizer, classNames, null);
  }

  /**
   * The checkpoint bytes of an adapted {@code state} under {@code selection}, with a replay memory (null: none;
   * its labels must be classes of the head).
   */
  public static byte[] encode(ModelMetadata m, Map<String, Tensor> state, Selection selection, String policy,
      boolean includeOptimizer, List<String> classNames, ReplayMemory replay) {
    Tensor classes = require(state, Contract.NUM_CLASSES);
    int k = classes.ints()[0];
    if (k < 1) {
      throw new IllegalStateException("the model has no head (num_classes is 0): adapt it before saving a checkpoint");
    }
    if (!classNames.isEmpty() && classNames.size() != k) {
      throw new IllegalArgumentException("classNames must name " + k + " classes; got " + classNames.size());
    }
    Map<String, Tensor> arrays = new TreeMap<>();
    Tensor prototypes = require(state, Contract.PROTOTYPES);
    arrays.put(Contract.PROTOTYPES, take(prototypes, 0, range(k)));
    arrays.put(Contract.NUM_CLASSES, classes);
    arrays.put(Contract.LEARNING_RATE, require(state, Contract.LEARNING_RATE));
    Map<String, int[]> channels = sortedSelection(m, selection);
    for (Map.Entry<String, int[]> entry : channels.entrySet()) {
      for (String key : layerKeys(state, entry.getKey(), includeOptimizer)) {
        Tensor value = require(state, key);
        arrays.put(key, take(value, channelAxis(m, entry.getKey(), value), entry.getValue()));
      }
    }
    if (includeOptimizer) {
      arrays.put(Contract.STEP, require(state, Contract.STEP));
    }
    if (replay != null) {
      for (int label : replay.labels()) {
        if (label < 0 || label >= k) {
          throw new IllegalArgumentException("replay labels must be classes 0.." + (k - 1) + " of the head; got "
              + label);
        }
      }
    }
    return encodeArrays(m.modelId, channels, policy, includeOptimizer, arrays, classNames, replay);
  }

  /** This checkpoint's bytes (what {@link #decode} read: the same bytes for a file written by Python or Java). */
  public byte[] encode() {
    return encodeArrays(modelId, selection, policy, includeOptimizer, arrays, classNames, replay);
  }

  /** The file: header (keys sorted, as Python's {@code json.dumps(sort_keys=True)}), payload, digest. */
  private static byte[] encodeArrays(String modelId, Map<String, int[]> channels, String policy,
      boolean includeOptimizer, Map<String, Tensor> state, List<String> classNames, ReplayMemory replay) {
    Map<String, Tensor> arrays = new TreeMap<>(state);
    if (replay != null) {
      arrays.put(Contract.REPLAY_ACTIVATIONS, replay.activations);
      arrays.put(Contract.REPLAY_LABELS, Tensor.ofInts(new int[] {replay.size()}, replay.labels()));
      arrays.put(Contract.REPLAY_IMAGES, Tensor.ofInts(new int[] {replay.size()}, replay.images()));
    }
    StringBuilder entries = new StringBuilder();
    List<byte[]> payload = new ArrayList<>();
    int offset = 0;
    for (Map.Entry<String, Tensor> entry : arrays.entrySet()) {
      byte[] data = bytes(entry.getValue());
      entries.append(entries.length() == 0 ? "" : ", ").append(object(Contract.CK_NAME, quote(entry.getKey()),
          Contract.CK_DTYPE, quote(entry.getValue().dtype == Tensor.DType.INT32 ? "int32" : "float32"),
          Contract.CK_SHAPE, ints(entry.getValue().shape()), Contract.CK_OFFSET, String.valueOf(offset),
          Contract.CK_NBYTES, String.valueOf(data.length)));
      payload.add(data);
      offset += data.length;
    }
    StringBuilder chosen = new StringBuilder("{");  // members sorted by name; the layers in forward order
    StringBuilder layers = new StringBuilder("[");
    for (Map.Entry<String, int[]> entry : new TreeMap<>(channels).entrySet()) {
      chosen.append(chosen.length() == 1 ? "" : ", ").append(quote(entry.getKey())).append(": ")
          .append(ints(entry.getValue()));
    }
    for (String layer : channels.keySet()) {
      layers.append(layers.length() == 1 ? "" : ", ").append(quote(layer));
    }
    String sel = object(Contract.SEL_CHANNELS, chosen + "}", Contract.F_FORMAT, quote(Contract.SELECTION_FORMAT),
        Contract.F_FORMAT_VERSION, String.valueOf(Contract.SELECTION_FORMAT_VERSION), Contract.SEL_LAYERS, layers + "]",
        Contract.SEL_POLICY, quote(policy));
    StringBuilder names = new StringBuilder("[");
    for (String name : classNames) {
      names.append(names.length() == 1 ? "" : ", ").append(quote(name));
    }
    List<String> fields = new ArrayList<>(List.of(Contract.CK_ARRAYS, "[" + entries + "]", Contract.CK_CLASS_NAMES,
        names + "]", Contract.F_FORMAT, quote(FORMAT), Contract.F_FORMAT_VERSION, String.valueOf(VERSION),
        Contract.CK_INCLUDE_OPTIMIZER, String.valueOf(includeOptimizer), Contract.F_MODEL_ID, quote(modelId),
        Contract.CK_PAYLOAD_BYTES, String.valueOf(offset)));
    if (replay != null) {
      fields.addAll(List.of(Contract.CK_REPLAY, object(Contract.RP_ACTIVATION_SHAPE, ints(replay.shape()),
          Contract.RP_BUDGET_BYTES, String.valueOf(replay.budgetBytes), Contract.RP_CUT_INDEX,
          String.valueOf(replay.cutIndex), Contract.RP_CUT_LAYER, quote(replay.cutLayer), Contract.F_FORMAT,
          quote(Contract.REPLAY_FORMAT), Contract.F_FORMAT_VERSION, String.valueOf(Contract.REPLAY_FORMAT_VERSION),
          Contract.F_RULE, quote(Contract.REPLAY_RULE))));
    }
    fields.addAll(List.of(Contract.CK_SELECTION, sel));
    String header = object(fields.toArray(new String[0]));
    byte[] head = header.getBytes(StandardCharsets.UTF_8);
    ByteBuffer body = ByteBuffer.allocate(PREFIX + head.length + offset + DIGEST).order(ByteOrder.LITTLE_ENDIAN);
    body.put(MAGIC).putInt(VERSION).putInt(head.length).put(head);
    for (byte[] data : payload) {
      body.put(data);
    }
    byte[] out = body.array();
    System.arraycopy(sha256(out, out.length - DIGEST), 0, out, out.length - DIGEST, DIGEST);
    return out;
  }

  /**
   * Parses and verifies checkpoint bytes: the digest, then every header field against the declared schema
   * ({@link CheckpointHeader}) before any value is used, then the payload's own rules (num_classes >= 1 rows
   * of prototypes, one class name per class).
   *
   * @throws CheckpointException wrong magic, format or version, truncated, checksum mismatch, or a header field
   *     of the wrong type, out of range or inconsistent (one line naming the field)
   */
  public static Checkpoint decode(byte[] data, String source) throws IOException {
    if (data.length < PREFIX + DIGEST) {
      throw new CheckpointException(source + ": truncated checkpoint (" + data.length + " bytes)");
    }
    ByteBuffer buf = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
    if (!Arrays.equals(Arrays.copyOf(data, MAGIC.length), MAGIC)) {
      throw new CheckpointException(source + ": not a tflite-train checkpoint (bad magic)");
    }
    int version = buf.getInt(8);
    if (version != VERSION) {
      throw new CheckpointException(source + ": checkpoint format version " + version + "; this reader supports " + VERSION);
    }
    if (!Arrays.equals(sha256(data, data.length - DIGEST), Arrays.copyOfRange(data, data.length - DIGEST, data.length))) {
      throw new CheckpointException(source + ": checkpoint is corrupt or truncated (sha256 mismatch)");
    }
    int headerLength = buf.getInt(12);
    if (headerLength < 0 || headerLength > data.length - PREFIX - DIGEST) {
      throw new CheckpointException(source + ": header length " + Integer.toUnsignedString(headerLength)
          + " exceeds the file's " + (data.length - PREFIX - DIGEST) + " bytes after the prefix");
    }
    Object parsed;
    try {
      java.nio.charset.CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder();
      parsed = Json.parse(utf8.decode(ByteBuffer.wrap(data, PREFIX, headerLength)).toString());
    } catch (java.nio.charset.CharacterCodingException | IllegalArgumentException | StackOverflowError err) {
      throw new CheckpointException(source + ": malformed checkpoint header (" + err + ")");
    }
    CheckpointHeader header = CheckpointHeader.check(parsed, source);
    int start = PREFIX + headerLength;
    if (start + header.payloadBytes != data.length - DIGEST) {
      throw new CheckpointException(source + ": payload has " + (data.length - DIGEST - start) + " bytes, header says "
          + header.payloadBytes);
    }
    Map<String, Tensor> arrays = new LinkedHashMap<>();
    for (CheckpointHeader.ArrayEntry entry : header.arrays) { // offsets, sizes and shapes agree (the schema)
      int at = start + (int) entry.offset;
      int nbytes = (int) entry.nbytes;
      ByteBuffer view = ByteBuffer.wrap(data, at, nbytes).slice().order(ByteOrder.LITTLE_ENDIAN);
      if ("int32".equals(entry.dtype)) {
        int[] values = new int[nbytes / 4];
        view.asIntBuffer().get(values);
        arrays.put(entry.name, Tensor.ofInts(entry.shape, values));
      } else {
        float[] values = new float[nbytes / 4];
        view.asFloatBuffer().get(values);
        arrays.put(entry.name, Tensor.ofFloats(entry.shape, values));
      }
    }
    int k = arrays.get(Contract.NUM_CLASSES).ints()[0];
    if (k < 1) {
      throw new CheckpointException(source + ": checkpoint array \"" + Contract.NUM_CLASSES + "\" is " + k
          + "; an adapted head has at least 1 class");
    }
    int rows = arrays.get(Contract.PROTOTYPES).shape()[0];
    if (rows != k) {
      throw new CheckpointException(source + ": checkpoint array \"" + Contract.PROTOTYPES + "\" has " + rows
          + " rows for " + Contract.NUM_CLASSES + " " + k);
    }
    if (!header.classNames.isEmpty() && header.classNames.size() != k) {
      throw new CheckpointException(source + ": checkpoint header field " + Contract.CK_CLASS_NAMES + ": names "
          + header.classNames.size() + " classes; the head has " + Contract.NUM_CLASSES + " " + k);
    }
    ReplayMemory replay = null;
    if (header.replay != null) {
      Tensor activations = arrays.remove(Contract.REPLAY_ACTIVATIONS);
      int[] labels = arrays.remove(Contract.REPLAY_LABELS).ints();
      for (int label : labels) {
        if (label < 0 || label >= k) {
          throw new CheckpointException(source + ": checkpoint array '" + Contract.REPLAY_LABELS + "' holds class "
              + label + "; the head has " + Contract.NUM_CLASSES + " " + k);
        }
      }
      for (float value : activations.floats()) {
        if (!Float.isFinite(value)) {
          throw new CheckpointException(source + ": checkpoint array '" + Contract.REPLAY_ACTIVATIONS
              + "' holds NaN or Inf");
        }
      }
      Tensor imageArray = arrays.remove(Contract.REPLAY_IMAGES);  // null in a version-1 section
      int[] images = imageArray == null ? null : imageArray.ints();
      if (images != null) {
        String problem = ReplayMemory.imageLayoutProblem(images, labels.length);
        if (!problem.isEmpty()) {
          throw new CheckpointException(source + ": checkpoint array '" + Contract.REPLAY_IMAGES + "' " + problem);
        }
        if (!ReplayMemory.labelsFollowImages(labels, images)) {
          throw new CheckpointException(source + ": checkpoint array '" + Contract.REPLAY_LABELS + "' labels a row "
              + "unlike its image ('" + Contract.REPLAY_IMAGES + "'): a view's class is its image's");
        }
      }
      ReplaySection section = header.replay;
      replay = images == null  // shapes and the budget were checked by the header's rules
          ? new ReplayMemory(section.cutLayer, section.cutIndex, section.shape(), section.budgetBytes, activations,
              labels)
          : new ReplayMemory(section.cutLayer, section.cutIndex, section.shape(), section.budgetBytes, activations,
              labels, images);
    }
    return new Checkpoint(header.modelId, new LinkedHashMap<>(header.channels), header.policy, header.includeOptimizer,
        arrays, new ArrayList<>(header.classNames), replay);
  }

  /**
   * The state to pass to {@code set_state}: {@code exported} (from {@code get_state} right after
   * {@code reset_state}) with this checkpoint's head, slices and selection mask written in.
   *
   * @throws IOException the checkpoint is for another model or does not fit this one
   */
  public Map<String, Tensor> restore(ModelMetadata m, Map<String, Tensor> exported) throws IOException {
    requireModel(m);
    if (replay != null) {
      replay.requireCut(m);
    }
    for (Map.Entry<String, int[]> entry : selection.entrySet()) {
      String layer = entry.getKey();
      if (!m.candidates.contains(layer)) {
        throw new CheckpointException("checkpoint selects layer " + layer + ", not a candidate of this model "
            + m.candidates);
      }
      int[] idx = entry.getValue();
      int outChannels = m.candidate(layer).outChannels;
      if (idx.length > 0 && idx[idx.length - 1] >= outChannels) {
        throw new CheckpointException("checkpoint: field " + Contract.CK_SELECTION + "." + Contract.SEL_CHANNELS + "['"
            + layer + "'] has channel " + idx[idx.length - 1] + "; layer " + layer + " has " + outChannels
            + " output channels");
      }
    }
    Tensor numClasses = arrays.get(Contract.NUM_CLASSES);
    int headClasses = numClasses == null || numClasses.size() != 1 ? -1 : numClasses.ints()[0];
    if (headClasses < 1 || headClasses > m.classCapacity) {
      throw new CheckpointException("checkpoint num_classes " + headClasses + " is outside 1.." + m.classCapacity);
    }
    if (!classNames.isEmpty() && classNames.size() != headClasses) {
      throw new CheckpointException("checkpoint names " + classNames.size() + " classes; its head has " + headClasses);
    }
    Map<String, Tensor> state = new LinkedHashMap<>(exported);
    Map<String, Tensor> left = new LinkedHashMap<>(arrays);
    try {
      Tensor classes = left.remove(Contract.NUM_CLASSES);
      int k = classes.ints()[0];
      state.put(Contract.PROTOTYPES, put(state.get(Contract.PROTOTYPES), 0, range(k), left.remove(Contract.PROTOTYPES)));
      state.put(Contract.NUM_CLASSES, classes);
      state.put(Contract.LEARNING_RATE, left.remove(Contract.LEARNING_RATE));
      if (left.containsKey(Contract.STEP)) {
        state.put(Contract.STEP, left.remove(Contract.STEP));
      }
      for (Map.Entry<String, int[]> entry : selection.entrySet()) {
        String layer = entry.getKey();
        m.maskOffset(layer);
        for (String key : layerKeys(state, layer, includeOptimizer)) {
          Tensor target = state.get(key);
          state.put(key, put(target, channelAxis(m, layer, target), entry.getValue(), left.remove(key)));
        }
        float[] mask = state.get(layer + Contract.MASK_SUFFIX).floats();
        for (int c : entry.getValue()) {
          mask[c] = 1f;
        }
        state.put(layer + Contract.MASK_SUFFIX, Tensor.ofFloats(new int[] {mask.length}, mask));
      }
    } catch (NullPointerException | IllegalArgumentException | IllegalStateException | IndexOutOfBoundsException err) {
      throw new CheckpointException("checkpoint does not fit this model: " + err);
    }
    if (!left.isEmpty()) {
      throw new CheckpointException("checkpoint has unexpected arrays " + left.keySet());
    }
    return state;
  }

  /** @throws IOException unless this checkpoint names {@code m}'s {@code model_id} */
  public void requireModel(ModelMetadata m) throws IOException {
    if (!m.modelId.equals(modelId)) {
      throw new CheckpointException("checkpoint is for model " + modelId.substring(0, Math.min(16, modelId.length()))
          + "..., not this model " + m.modelId.substring(0, Math.min(16, m.modelId.length())) + "...; refusing to load");
    }
  }

  /**
   * Writes {@code data} to {@code path} atomically: a temp file beside it, fsync'd, then moved over it. The
   * temp file is named {@code .<name><random>.tmp}, with {@link #tempStem} of the name when the name is too
   * long for that within the 255-byte file-name limit (as Python's {@code output_names.sibling_stem}).
   */
  public static void writeAtomic(Path path, byte[] data) throws IOException {
    Path dir = path.toAbsolutePath().getParent();
    Path tmp = Files.createTempFile(dir, "." + tempStem(path.getFileName().toString()), ".tmp");
    try {
      try (java.nio.channels.FileChannel channel = java.nio.channels.FileChannel.open(tmp,
          java.nio.file.StandardOpenOption.WRITE)) {
        ByteBuffer buf = ByteBuffer.wrap(data);
        while (buf.hasRemaining()) {
          channel.write(buf);
        }
        channel.force(true);
      }
      try {
        Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      } catch (AtomicMoveNotSupportedException err) {
        Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING);
      }
    } finally {
      Files.deleteIfExists(tmp);
    }
  }

  /** Most bytes of a file name (Linux, macOS, Android: 255). */
  static final int NAME_MAX = 255;
  /** What a temp file adds to the stem: "." before it, up to 20 random digits and ".tmp" after it. */
  static final int TEMP_TAIL_BYTES = 25;

  /**
   * {@code name} itself when a temp file's name built from it fits {@link #NAME_MAX} bytes, else its longest
   * prefix that fits (cut at a character boundary) + "~" + 8 hex digits of the name's sha256.
   */
  static String tempStem(String name) {
    byte[] utf8 = name.getBytes(StandardCharsets.UTF_8);
    int room = NAME_MAX - TEMP_TAIL_BYTES;
    if (utf8.length <= room) {
      return name;
    }
    byte[] digest = sha256(utf8, utf8.length);
    StringBuilder hex = new StringBuilder();
    for (int i = 0; i < 4; i++) {
      hex.append(String.format("%02x", digest[i] & 0xff));
    }
    StringBuilder prefix = new StringBuilder();
    int used = 0;
    for (int i = 0; i < name.length(); ) {
      int cp = name.codePointAt(i);
      int size = new String(Character.toChars(cp)).getBytes(StandardCharsets.UTF_8).length;
      if (used + size > room - 9) {
        break;
      }
      prefix.appendCodePoint(cp);
      used += size;
      i += Character.charCount(cp);
    }
    return prefix + "~" + hex;
  }

  private static Map<String, int[]> sortedSelection(ModelMetadata m, Selection selection) {
    Map<String, int[]> chosen = selection.channels();
    Map<String, int[]> out = new LinkedHashMap<>();
    for (String layer : m.candidates) {
      int[] channels = chosen.get(layer);
      if (channels != null) {
        int[] sorted = channels.clone();
        Arrays.sort(sorted);
        out.put(layer, sorted);
      }
    }
    return out;
  }

  /** kernel, bias and (with the optimizer) their slots in sorted order, as Python's {@code _layer_keys}. */
  private static List<String> layerKeys(Map<String, Tensor> state, String layer, boolean includeOptimizer) {
    List<String> keys = new ArrayList<>(List.of(layer + Contract.KERNEL_SUFFIX, layer + Contract.BIAS_SUFFIX));
    if (includeOptimizer) {
      List<String> slots = new ArrayList<>();
      for (String key : state.keySet()) {
        if (key.startsWith(layer + Contract.KERNEL_SUFFIX + "_") || key.startsWith(layer + Contract.BIAS_SUFFIX + "_")) {
          slots.add(key);
        }
      }
      slots.sort(null);
      keys.addAll(slots);
    }
    return keys;
  }

  /** Output-channel axis: 0 for rank 1, 2 for a depthwise kernel [k, k, C, 1], else the last. */
  private static int channelAxis(ModelMetadata m, String layer, Tensor value) {
    int[] shape = value.shape();
    int channels = m.candidate(layer).outChannels;
    if (shape.length == 1) {
      return 0;
    }
    if (shape.length == 4 && shape[3] == 1 && shape[2] == channels && channels != 1) {
      return 2;
    }
    return shape.length - 1;
  }

  private static Tensor require(Map<String, Tensor> state, String name) {
    Tensor t = state.get(name);
    if (t == null) {
      throw new IllegalArgumentException("state has no tensor " + name + "; it has " + state.keySet());
    }
    return t;
  }

  private static int[] range(int n) {
    int[] out = new int[n];
    for (int i = 0; i < n; i++) {
      out[i] = i;
    }
    return out;
  }

  /** {@code value} indexed by {@code idx} along {@code axis} (numpy {@code take}). */
  static Tensor take(Tensor value, int axis, int[] idx) {
    int[] shape = value.shape();
    int outer = 1;
    int inner = 1;
    for (int i = 0; i < axis; i++) {
      outer *= shape[i];
    }
    for (int i = axis + 1; i < shape.length; i++) {
      inner *= shape[i];
    }
    int[] outShape = shape.clone();
    outShape[axis] = idx.length;
    float[] src = value.floats();
    float[] dst = new float[outer * idx.length * inner];
    for (int o = 0; o < outer; o++) {
      for (int j = 0; j < idx.length; j++) {
        System.arraycopy(src, (o * shape[axis] + idx[j]) * inner, dst, (o * idx.length + j) * inner, inner);
      }
    }
    return Tensor.ofFloats(outShape, dst);
  }

  /** {@code target} with {@code values} written at {@code idx} along {@code axis} (inverse of {@link #take}). */
  static Tensor put(Tensor target, int axis, int[] idx, Tensor values) {
    int[] shape = target.shape();
    int[] expected = shape.clone();
    expected[axis] = idx.length;
    if (!Arrays.equals(expected, values.shape())) {
      throw new IllegalArgumentException("slice has shape " + Arrays.toString(values.shape()) + "; expected "
          + Arrays.toString(expected));
    }
    int outer = 1;
    int inner = 1;
    for (int i = 0; i < axis; i++) {
      outer *= shape[i];
    }
    for (int i = axis + 1; i < shape.length; i++) {
      inner *= shape[i];
    }
    float[] dst = target.floats();
    float[] src = values.floats();
    for (int o = 0; o < outer; o++) {
      for (int j = 0; j < idx.length; j++) {
        System.arraycopy(src, (o * idx.length + j) * inner, dst, (o * shape[axis] + idx[j]) * inner, inner);
      }
    }
    return Tensor.ofFloats(shape, dst);
  }

  private static byte[] bytes(Tensor t) {
    ByteBuffer buf = ByteBuffer.allocate(t.size() * 4).order(ByteOrder.LITTLE_ENDIAN);
    if (t.dtype == Tensor.DType.INT32) {
      buf.asIntBuffer().put(t.ints());
    } else {
      buf.asFloatBuffer().put(t.floats());
    }
    return buf.array();
  }

  private static byte[] sha256(byte[] data, int length) {
    try {
      MessageDigest digest = MessageDigest.getInstance("SHA-256");
      digest.update(data, 0, length);
      return digest.digest();
    } catch (NoSuchAlgorithmException err) {
      throw new IllegalStateException("SHA-256 unavailable", err);
    }
  }

  /** A JSON string as Python's {@code json.dumps} writes it (ASCII: other characters as UTF-16 escapes). */
  private static String quote(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c == '\n') {
        b.append("\\n");
      } else if (c == '\r') {
        b.append("\\r");
      } else if (c == '\t') {
        b.append("\\t");
      } else if (c == '\b') {
        b.append("\\b");
      } else if (c == '\f') {
        b.append("\\f");
      } else if (c < 0x20 || c > 0x7e) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }

  /**
   * A JSON object of alternating keys and already-encoded values, its members sorted by key as Python's
   * {@code json.dumps(sort_keys=True)} writes them (so that both write the same bytes).
   */
  private static String object(String... keysAndValues) {
    TreeMap<String, String> members = new TreeMap<>();
    for (int i = 0; i < keysAndValues.length; i += 2) {
      members.put(keysAndValues[i], keysAndValues[i + 1]);
    }
    StringBuilder b = new StringBuilder("{");
    for (Map.Entry<String, String> member : members.entrySet()) {
      b.append(b.length() > 1 ? ", " : "").append(quote(member.getKey())).append(": ").append(member.getValue());
    }
    return b.append('}').toString();
  }

  private static String ints(int[] values) {
    StringBuilder b = new StringBuilder("[");
    for (int i = 0; i < values.length; i++) {
      b.append(i > 0 ? ", " : "").append(values[i]);
    }
    return b.append(']').toString();
  }
}
