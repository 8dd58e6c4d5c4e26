#!/bin/sh
# Regenerates docs/adapt_example.png and docs/adapt_example.txt (shown in the README): a real
# adaptation of the shipped meta-trained MCUNet@64 to 5 classes of Tux Paint clip art (Debian
# tuxpaint-stamps-default), 5 images each, through the TFLite interpreter. Run by `make adapt-example`.
set -eu
PY=${PY:-.venv/bin/python}
OUT=build/example
STAMPS=/usr/share/tuxpaint/stamps
mkdir -p "$OUT" docs
[ -f "$OUT/mcunet_64.tflite" ] || $PY -m tflite_train.cli export --weights weights/mcunet_64_meta.weights.h5 \
  --candidate-blocks 6 --out "$OUT/mcunet_64.tflite"
rm -rf "$OUT/support" "$OUT/query"
for class in animals/birds animals/fish food/fruit plants/flowers space/planets; do
  name=$(basename "$class")
  mkdir -p "$OUT/support/$name" "$OUT/query/$name"
  n=0
  find "$STAMPS/$class" -maxdepth 1 -name '*.png' | LC_ALL=C sort | while read -r file; do
    n=$((n + 1))
    if [ $n -le 5 ]; then cp "$file" "$OUT/support/$name/"; elif [ $n -le 10 ]; then cp "$file" "$OUT/query/$name/"; fi
  done
done
$PY -m tflite_train.cli adapt --model "$OUT/mcunet_64.tflite" --support "$OUT/support" --query "$OUT/query" \
  --out "$OUT/example.ckpt" --mem-budget 1MiB --compute-budget 0.15 --epochs 40 --quiet \
  --plot docs/adapt_example.png > docs/adapt_example.txt
cat docs/adapt_example.txt
