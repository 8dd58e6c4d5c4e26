package org.tflitetrain.core.model;

import org.tflitetrain.core.cost.LayerSpec;

/** One entry of the metadata's {@code layers}: the layer spec plus params, forward MACs and candidacy. */
public final class MetadataLayer {
  public final LayerSpec spec;
  public final long params;
  public final long forwardMacs;
  public final boolean candidate;

  MetadataLayer(LayerSpec spec, long params, long forwardMacs, boolean candidate) {
    this.spec = spec;
    this.params = params;
    this.forwardMacs = forwardMacs;
    this.candidate = candidate;
  }
}
