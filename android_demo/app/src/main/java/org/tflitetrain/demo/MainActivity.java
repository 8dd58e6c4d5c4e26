package org.tflitetrain.demo;

import android.app.Activity;
import android.content.ActivityNotFoundException;
import android.content.Intent;
import android.content.res.AssetFileDescriptor;
import android.graphics.Bitmap;
import android.os.Bundle;
import android.os.Handler;
import android.os.Looper;
import android.provider.MediaStore;
import android.util.Log;
import android.widget.Button;
import android.widget.ImageView;
import android.widget.ProgressBar;
import android.widget.TextView;
import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicBoolean;
import org.tflitetrain.core.adapt.AdaptationConfig;
import org.tflitetrain.core.adapt.AdaptationDriver;
import org.tflitetrain.core.adapt.AdaptationListener;
import org.tflitetrain.core.adapt.AdaptationResult;
import org.tflitetrain.core.adapt.Checkpoint;
import org.tflitetrain.core.adapt.ConfiguredPolicy;
import org.tflitetrain.core.adapt.SelectionPolicy;
import org.tflitetrain.core.adapt.Tensor;
import org.tflitetrain.core.model.Contract;
import org.tflitetrain.core.model.ModelMetadata;
import org.tflitetrain.core.model.ModelMetadataException;
import org.tflitetrain.core.select.Budget;
import org.tflitetrain.core.select.Criterion;
import org.tflitetrain.core.select.OnEmpty;

/**
 * Collect photos per class, adapt the model on a background thread (fisher -> selection ->
 * train_step), classify new photos with infer, and save/restore the adapted state.
 */
public final class MainActivity extends Activity {
  private static final String TAG = "TinyTrainDemo";
  private static final String MODEL_ASSET = "model.tflite";
  /** The shared checkpoint format (CONTRACT.md; Python's tflite_train.runtime.checkpoint.checkpoint reads it too). */
  private static final String STATE_FILE = "adapted.ckpt";
  private static final int REQUEST_ADD_CAMERA = 1;
  private static final int REQUEST_ADD_GALLERY = 2;
  private static final int REQUEST_CLASSIFY_CAMERA = 3;
  private static final int REQUEST_CLASSIFY_GALLERY = 4;
  /*
   * Adaptation runs the library's default protocol (AdaptationConfig.Builder's defaults, the generated
   * Contract.PROTOCOL_*: Python's DEFAULT_PROTOCOL, as `tflite-train adapt` and the demo): PROTOCOL_EPOCHS
   * passes over the photos at batch PROTOCOL_BATCH_SIZE, B_compute PROTOCOL_COMPUTE_FRACTION of the full
   * backward pass, the model's learning rate. The budget is the library's default for the model,
   * Budget.defaultBudget (Python's sparse.default_budget, as `tflite-train adapt`): the paper's 1 MiB for
   * MCUNet@128 scaled by the model's LastLayer backward memory and that B_compute, raised on a small model just
   * enough to admit one candidate layer at the policy's channel ratio and the train batch size.
   */
  /**
   * TinyTrain's dynamic selection (Fisher potential -> Eq. 3 score -> greedy layers under the budget ->
   * top 25 % channels by Fisher); when nothing fits, no update instead of an error.
   */
  private static final double CHANNEL_RATIO = 0.25;
  private static final SelectionPolicy POLICY = ConfiguredPolicy.tinyTrain(CHANNEL_RATIO, Criterion.TINYTRAIN,
      OnEmpty.EMPTY);

  private final ExecutorService worker = Executors.newSingleThreadExecutor();
  private final Handler ui = new Handler(Looper.getMainLooper());
  private final AtomicBoolean cancel = new AtomicBoolean();

  private TfliteSignatureRunner runner;
  private ModelMetadata metadata;
  private AdaptationDriver driver;
  private volatile AdaptationResult lastResult;
  private SupportSet support;
  private int currentClass;
  private boolean busy;

  private TextView modelInfo;
  private TextView currentClassView;
  private TextView photoCounts;
  private TextView status;
  private TextView prediction;
  private ProgressBar progress;
  private ImageView preview;
  private Button adaptButton;
  private Button cancelButton;

  @Override
  protected void onCreate(Bundle savedInstanceState) {
    super.onCreate(savedInstanceState);
    setContentView(R.layout.activity_main);
    modelInfo = findViewById(R.id.model_info);
    currentClassView = findViewById(R.id.current_class);
    photoCounts = findViewById(R.id.photo_counts);
    status = findViewById(R.id.status);
    prediction = findViewById(R.id.prediction);
    progress = findViewById(R.id.progress);
    preview = findViewById(R.id.preview);
    adaptButton = findViewById(R.id.adapt);
    cancelButton = findViewById(R.id.cancel);

    findViewById(R.id.prev_class).setOnClickListener(v -> selectClass(currentClass - 1));
    findViewById(R.id.next_class).setOnClickListener(v -> selectClass(currentClass + 1));
    findViewById(R.id.add_camera).setOnClickListener(v -> startCamera(REQUEST_ADD_CAMERA));
    findViewById(R.id.add_gallery).setOnClickListener(v -> startGallery(REQUEST_ADD_GALLERY));
    findViewById(R.id.clear_photos).setOnClickListener(v -> {
      if (support != null) {
        support.clear();
        refreshCounts();
      }
    });
    adaptButton.setOnClickListener(v -> adapt());
    cancelButton.setOnClickListener(v -> cancel.set(true));
    findViewById(R.id.classify_camera).setOnClickListener(v -> startCamera(REQUEST_CLASSIFY_CAMERA));
    findViewById(R.id.classify_gallery).setOnClickListener(v -> startGallery(REQUEST_CLASSIFY_GALLERY));
    findViewById(R.id.save_state).setOnClickListener(v -> saveState());
    findViewById(R.id.restore_state).setOnClickListener(v -> restoreState());
    findViewById(R.id.reset_state).setOnClickListener(v -> resetState());

    loadModel();
  }

  @Override
  protected void onDestroy() {
    cancel.set(true);
    // The interpreter is closed on the worker thread after any running job has finished.
    worker.execute(() -> {
      if (runner != null) {
        runner.close();
      }
    });
    worker.shutdown();
    super.onDestroy();
  }

  private void loadModel() {
    try (AssetFileDescriptor fd = getAssets().openFd(MODEL_ASSET);
        FileInputStream in = new FileInputStream(fd.getFileDescriptor())) {
      MappedByteBuffer model = in.getChannel().map(FileChannel.MapMode.READ_ONLY, fd.getStartOffset(), fd.getDeclaredLength());
      metadata = ModelMetadata.load(model);
      runner = new TfliteSignatureRunner(model, Math.max(1, Runtime.getRuntime().availableProcessors() / 2));
      driver = new AdaptationDriver(metadata, runner);
      support = new SupportSet(metadata.input);
      modelInfo.setText(String.format(Locale.US,
          "%s  %dx%dx%d  classes<=%d  candidates: %s\noptimizer %s, lr %.2g; signatures: %s",
          metadata.backbone, metadata.input.height, metadata.input.width, metadata.input.channels,
          metadata.classCapacity, String.join(", ", metadata.candidates), metadata.optimizer.optimizer.wireName,
          metadata.optimizer.learningRate, String.join(", ", runner.signatures())));
      selectClass(0);
    } catch (IOException err) {
      fail("cannot open assets/" + MODEL_ASSET + " (copy an exported model there): " + err.getMessage(), err);
    } catch (ModelMetadataException err) {
      fail("the model cannot be used: " + err.getMessage(), err);
    } catch (IllegalArgumentException err) {
      fail("the interpreter rejected the model: " + err.getMessage(), err);
    }
  }

  private void fail(String message, Throwable err) {
    Log.e(TAG, message, err);
    modelInfo.setText(message);
    setButtonsEnabled(false);
  }

  private void setButtonsEnabled(boolean enabled) {
    int[] ids = {R.id.prev_class, R.id.next_class, R.id.add_camera, R.id.add_gallery, R.id.clear_photos, R.id.adapt,
        R.id.classify_camera, R.id.classify_gallery, R.id.save_state, R.id.restore_state, R.id.reset_state};
    for (int id : ids) {
      findViewById(id).setEnabled(enabled);
    }
  }

  private void selectClass(int index) {
    if (metadata == null) {
      return;
    }
    currentClass = Math.max(0, Math.min(metadata.classCapacity - 1, index));
    currentClassView.setText(String.format(Locale.US, "class %d", currentClass));
    refreshCounts();
  }

  private void refreshCounts() {
    StringBuilder text = new StringBuilder("photos per class:");
    int classes = Math.max(support.numClasses(), currentClass + 1);
    for (int c = 0; c < classes; c++) {
      text.append(String.format(Locale.US, "  %d: %d", c, support.count(c)));
    }
    photoCounts.setText(text.toString());
  }

  private void startCamera(int request) {
    try {
      startActivityForResult(new Intent(MediaStore.ACTION_IMAGE_CAPTURE), request);
    } catch (ActivityNotFoundException err) {
      status.setText("no camera app available");
    }
  }

  private void startGallery(int request) {
    Intent intent = new Intent(Intent.ACTION_GET_CONTENT);
    intent.setType("image/*");
    intent.addCategory(Intent.CATEGORY_OPENABLE);
    startActivityForResult(Intent.createChooser(intent, getString(R.string.add_gallery)), request);
  }

  @Override
  protected void onActivityResult(int requestCode, int resultCode, Intent data) {
    super.onActivityResult(requestCode, resultCode, data);
    if (resultCode != RESULT_OK || data == null || metadata == null) {
      return;
    }
    Bitmap bitmap;
    try {
      if (requestCode == REQUEST_ADD_CAMERA || requestCode == REQUEST_CLASSIFY_CAMERA) {
        // Without EXTRA_OUTPUT the camera app returns a thumbnail, larger than the model inputs.
        Bundle extras = data.getExtras();
        Object thumbnail = extras == null ? null : extras.get("data");
        if (!(thumbnail instanceof Bitmap)) {
          status.setText("the camera app returned no image");
          return;
        }
        bitmap = (Bitmap) thumbnail;
      } else {
        if (data.getData() == null) {
          return;
        }
        bitmap = BitmapInput.decode(getContentResolver(), data.getData());
      }
    } catch (IOException err) {
      status.setText("cannot read the photo: " + err.getMessage());
      return;
    }
    float[] input = BitmapInput.toInput(bitmap, metadata.input);
    preview.setImageBitmap(bitmap);
    if (requestCode == REQUEST_ADD_CAMERA || requestCode == REQUEST_ADD_GALLERY) {
      support.add(input, currentClass);
      refreshCounts();
    } else {
      classify(input);
    }
  }

  private void adapt() {
    if (busy) {
      return;
    }
    int classes = support.numClasses();
    for (int c = 0; c < classes; c++) {
      if (support.count(c) == 0) {
        status.setText(String.format(Locale.US, "class %d has no photos", c));
        return;
      }
    }
    if (classes < 2) {
      status.setText("add photos of at least two classes");
      return;
    }
    Tensor images = support.images();
    int[] labels = support.labels();
    SelectionPolicy policy = POLICY;
    int batch = Math.min(Contract.PROTOCOL_BATCH_SIZE, labels.length);
    AdaptationConfig config = new AdaptationConfig.Builder().evalBatchSize(8)
        .budget(Budget.defaultBudget(metadata.table, metadata.candidates, Contract.PROTOCOL_COMPUTE_FRACTION,
            CHANNEL_RATIO, metadata.optimizer.optimizer, batch))
        .build();
    cancel.set(false);
    setBusy(true);
    progress.setProgress(0);
    worker.execute(() -> {
      try {
        AdaptationResult result = driver.adapt(images, labels, classes, policy, config, new AdaptationListener() {
          @Override
          public void onStage(Stage stage) {
            ui.post(() -> status.setText("stage: " + stage.name().toLowerCase(Locale.US)));
          }

          @Override
          public void onStep(int step, int total, float loss, float accuracy) {
            ui.post(() -> {
              progress.setProgress(100 * step / Math.max(1, total));
              status.setText(String.format(Locale.US, "step %d/%d  loss %.4f  acc %.2f", step, total, loss, accuracy));
            });
          }
        }, cancel::get);
        lastResult = result;
        ui.post(() -> showResult(result));
      } catch (CancellationException err) {
        ui.post(() -> status.setText("cancelled; the model is partly adapted (reset or restore to undo)"));
      } catch (Exception err) {
        Log.e(TAG, "adaptation failed", err);
        ui.post(() -> status.setText("adaptation failed: " + err));
      } finally {
        ui.post(() -> setBusy(false));
      }
    });
  }

  private void showResult(AdaptationResult result) {
    if (result.selection.isEmpty()) {
      status.setText(String.format(Locale.US, "no update (%s): no layer fits %s at batch %d", result.policy,
          result.budget, result.batchSize));
      progress.setProgress(100);
      return;
    }
    StringBuilder layers = new StringBuilder();
    for (Map.Entry<String, Integer> entry : result.selection.channelCounts().entrySet()) {
      layers.append(String.format(Locale.US, "%s(%d/%d) ", entry.getKey(), entry.getValue(),
          metadata.candidate(entry.getKey()).outChannels));
    }
    float first = result.losses.isEmpty() ? Float.NaN : result.losses.get(0);
    float last = result.losses.isEmpty() ? Float.NaN : result.losses.get(result.losses.size() - 1);
    status.setText(String.format(Locale.US,
        "adapted (%s): loss %.4f -> %.4f\nlayers: %s\nbackward memory %d B (%.0f%% of budget), %d MACs/sample (%.0f%% of budget), batch %d",
        result.policy, first, last, layers.toString().trim(), result.cost.totalBytes(), 100 * result.memoryUse(),
        result.cost.backwardMacs(), 100 * result.computeUse(), result.batchSize));
    progress.setProgress(100);
  }

  private void setBusy(boolean value) {
    busy = value;
    adaptButton.setEnabled(!value);
    cancelButton.setEnabled(value);
  }

  private void classify(float[] input) {
    if (driver.numClasses() == 0) {
      prediction.setText("adapt or restore a state first");
      return;
    }
    Tensor image = Tensor.ofFloats(new int[] {1, metadata.input.height, metadata.input.width, metadata.input.channels}, input);
    worker.execute(() -> {
      try {
        float[] logits = driver.classify(image, 1)[0];
        int best = AdaptationDriver.argmax(logits);
        ui.post(() -> prediction.setText(String.format(Locale.US, "class %d  (logit %.3f)", best, logits[best])));
      } catch (Exception err) {
        Log.e(TAG, "classification failed", err);
        ui.post(() -> prediction.setText("classification failed: " + err));
      }
    });
  }

  private File stateFile() {
    return new File(getFilesDir(), STATE_FILE);
  }

  private void saveState() {
    worker.execute(() -> {
      File target = stateFile();
      try {
        AdaptationResult result = lastResult;
        if (result == null) {
          throw new IOException("adapt the model before saving a checkpoint");
        }
        driver.saveCheckpoint(target.toPath(), result.selection, result.policy, true);
        ui.post(() -> status.setText(String.format(Locale.US, "saved checkpoint (%d bytes)", target.length())));
      } catch (Exception err) {
        Log.e(TAG, "save failed", err);
        ui.post(() -> status.setText("save failed: " + err));
      }
    });
  }

  private void restoreState() {
    worker.execute(() -> {
      try {
        File source = stateFile();
        Checkpoint checkpoint = driver.restoreCheckpoint(java.nio.file.Files.readAllBytes(source.toPath()),
            source.getPath());
        ui.post(() -> status.setText(String.format(Locale.US, "restored checkpoint (%d layers); %d classes",
            checkpoint.selection.size(), driver.numClasses())));
      } catch (Exception err) {
        Log.e(TAG, "restore failed", err);
        ui.post(() -> status.setText("restore failed: " + err));
      }
    });
  }

  private void resetState() {
    worker.execute(() -> {
      try {
        driver.resetState();
        ui.post(() -> status.setText("model reset to the exported state"));
      } catch (Exception err) {
        Log.e(TAG, "reset failed", err);
        ui.post(() -> status.setText("reset failed: " + err));
      }
    });
  }
}
