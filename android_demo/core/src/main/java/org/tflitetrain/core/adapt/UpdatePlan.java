package org.tflitetrain.core.adapt;

import java.util.ArrayList;
import java.util.List;
import java.util.function.IntPredicate;
import org.tflitetrain.core.adapt.AdaptationConfig.BatchMode;
import org.tflitetrain.core.adapt.AdaptationConfig.PrototypeMode;

/**
 * How every update of an adaptation runs, resolved against the model and the memory budget: the port of Python's
 * {@code tflite_train.runtime.adaptation.fine_tuning.plan_updates} / {@code UpdatePlan} (pinned by the golden
 * {@code procedure.json}).
 *
 * <p>Rules: episode prototypes need a cached cut with its {@code episode_step_from_<layer>} and N + B rows within
 * B_mem, else prototypes refreshed without gradient; accumulation needs the cut's {@code accumulate_from_<layer>}
 * and the file's {@code apply_accumulated}, else real batches; a real batch whose rows do not fit B_mem is reduced
 * to the most rows that do (at least 1). What was reduced says so in {@link #note}.
 */
public final class UpdatePlan {
  /** Where the prototypes of each update come from. */
  public final PrototypeMode prototypeMode;
  /** One batched step, or accumulated rows. */
  public final BatchMode batchMode;
  /** Pseudo-queries per update (B). */
  public final int batch;
  /**
   * Rows one train-step call holds (what B_mem was checked against): B for a batch (plus the support rows of an
   * episode step), 1 when accumulating.
   */
  public final int rows;
  /** One line on what was reduced from the config, and why; empty when nothing was. */
  public final String note;

  UpdatePlan(PrototypeMode prototypeMode, BatchMode batchMode, int batch, int rows, String note) {
    this.prototypeMode = prototypeMode;
    this.batchMode = batchMode;
    this.batch = batch;
    this.rows = rows;
    this.note = note;
  }

  /** The same plan with {@code batch} pseudo-queries per update (the rate choice caps it at K). */
  UpdatePlan withBatch(int value) {
    return new UpdatePlan(prototypeMode, batchMode, value, rows, note);
  }

  /**
   * The plan for the config's {@code prototypeMode} / {@code batchMode} / {@code batch} on this model (pure).
   *
   * @param numSupport support images that form the prototypes of an episode step
   * @param cached the steps run from a cached cut (episode and accumulation signatures exist per cut only)
   * @param episode the cut has an episode step
   * @param accumulate the cut has an accumulation step and the file {@code apply_accumulated}
   * @param fits whether a train-step call of that many rows fits B_mem (the selection's cost at that batch)
   */
  public static UpdatePlan plan(PrototypeMode prototypeMode, BatchMode batchMode, int batch, int numSupport,
      boolean cached, boolean episode, boolean accumulate, IntPredicate fits) {
    List<String> notes = new ArrayList<>();
    PrototypeMode prototypes = prototypeMode;
    if (prototypes == PrototypeMode.EPISODE) {
      if (!(cached && episode)) {
        notes.add("episode prototypes need a cached cut with an episode step: prototypes refreshed without "
            + "gradient instead");
        prototypes = PrototypeMode.REFRESH;
      } else if (!fits.test(numSupport + batch)) {
        notes.add("an episode step of " + numSupport + " support + " + batch + " pseudo-query rows exceeds B_mem: "
            + "prototypes refreshed without gradient instead");
        prototypes = PrototypeMode.REFRESH;
      } else {
        return new UpdatePlan(prototypes, BatchMode.BATCH, batch, numSupport + batch, "");
      }
    }
    if (batchMode == BatchMode.ACCUMULATE) {
      if (cached && accumulate) {
        return new UpdatePlan(prototypes, batchMode, batch, 1, String.join("; ", notes));
      }
      notes.add("the model has no gradient accumulation at this cut: real batches instead");
    }
    int rows = batch;
    while (rows > 1 && !fits.test(rows)) {
      rows--;
    }
    if (rows < batch) {
      notes.add("a batch of " + batch + " pseudo-queries exceeds B_mem: reduced to " + rows);
    }
    return new UpdatePlan(prototypes, BatchMode.BATCH, rows, rows, String.join("; ", notes));
  }

  @Override
  public String toString() {
    return "UpdatePlan(" + prototypeMode.pythonName + ", " + batchMode.pythonName + ", batch " + batch + ", rows "
        + rows + (note.isEmpty() ? "" : ", " + note) + ")";
  }
}
