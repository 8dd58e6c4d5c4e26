# Two entry points (see README): `make demo` and `make test`. Both create what they need.
PYTHON ?= python3
VENV := .venv
PI_VENV := .venv-pi
BENCH_VENV := .venv-bench

.PHONY: demo test test-main test-zoo test-pi test-java test-wheel fixtures clean-venvs data-deps npm-data icon-data data weights weights-lite0 bench bench-quick bench-powered bench-peer bench-int8 bench-memory adapt-example

# Offline data sources (Debian packages; see tflite_train/data). Installed only when missing.
DATA_DEBS := fonts-noto-core fonts-dejavu-core fonts-freefont-ttf fonts-liberation dataset-fashion-mnist tuxpaint-stamps-default
# Only for the emoji source (make data): npm fetches the tarballs, rsvg-convert renders the SVG-only sets. Installed
# from Debian only when the command is missing (an npm that came with a non-Debian Node.js conflicts with Debian's).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DATA_CACHE := build/data_cache
# The same data sets at EfficientNet-Lite0's input size (the benchmark never upscales the 64 px cache).
DATA_CACHE_128 := build/data_cache_128

$(VENV)/.installed: requirements/main.txt setup.py
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements/main.txt
	$(VENV)/bin/pip install --quiet --no-deps -e .
	touch $@

$(PI_VENV)/.installed: requirements/pi.txt setup.py
	$(PYTHON) -m venv $(PI_VENV)
	$(PI_VENV)/bin/pip install --quiet --upgrade pip
	$(PI_VENV)/bin/pip install --quiet -r requirements/pi.txt
	$(PI_VENV)/bin/pip install --quiet --no-deps -e .
	touch $@

demo: $(VENV)/.installed data-deps
	$(VENV)/bin/tflite-train demo

test: test-main test-pi test-java test-wheel

data-deps:
	@missing=$$(for p in $(DATA_DEBS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then echo "apt-get install $$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; fi

# The pinned npm tarballs of the emoji source and the line_icons target (tflite_train/data/emoji.py and
# line_icons.py PACKAGES: name@version and the sha512 that `data prepare` checks before reading them), fetched
# with `npm pack` into the cache's download folder (each PACKAGES entry prints as spec,tarball-file-name).
NPM_DIR := $(DATA_CACHE)/downloads/npm
npm-data: $(VENV)/.installed data-deps
	@missing=$$(command -v npm >/dev/null || echo npm; command -v rsvg-convert >/dev/null || echo librsvg2-bin); \
	if [ -n "$$missing" ]; then echo "apt-get install $$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; fi
	mkdir -p $(NPM_DIR)
	for pair in $$($(VENV)/bin/python -c "from tflite_train.data import emoji, line_icons; \
	  print(' '.join(f'{p.spec},{p.tarball}' for m in (emoji, line_icons) for p in m.PACKAGES.values()))"); do \
	  spec=$${pair%,*}; tgz=$${pair#*,}; [ -f $(NPM_DIR)/$$tgz ] || (cd $(NPM_DIR) && npm pack --silent $$spec) || exit 1; done

# The pinned Debian icon-theme packages of the icon_themes source (tflite_train/data/icon_themes.py THEMES:
# package=version), fetched with `apt-get download` (apt checks each against the signed archive index) and
# unpacked with `dpkg -x` into the cache's download folder (nothing is installed; read only by `data prepare`).
DEB_DIR := $(DATA_CACHE)/downloads/deb
icon-data: $(VENV)/.installed
	mkdir -p $(DEB_DIR)
	for spec in $$($(VENV)/bin/python -c "from tflite_train.data.icon_themes import THEMES; print(' '.join(t.spec for t in THEMES))"); do \
	  pkg=$${spec%%=*}; [ -d $(DEB_DIR)/$$pkg ] && continue; \
	  (cd $(DEB_DIR) && (apt-get download -qq $$spec 2>/dev/null || ($(SUDO) apt-get update -qq && apt-get download -qq $$spec))) || exit 1; \
	  dpkg -x $(DEB_DIR)/$${pkg}_*.deb $(DEB_DIR)/$$pkg.tmp && mv $(DEB_DIR)/$$pkg.tmp $(DEB_DIR)/$$pkg || exit 1; done

# The verified data cache (idempotent: a second run checks the checksums and does nothing).
data: $(VENV)/.installed data-deps npm-data icon-data
	$(VENV)/bin/tflite-train data prepare --out $(DATA_CACHE)
	$(VENV)/bin/tflite-train data prepare --out $(DATA_CACHE_128) --image-size 128 --downloads-from $(DATA_CACHE)

# The shipped meta-trained MCUNet weights (about 20 min on 2 CPU cores), written to weights/.
weights: data
	nice -n 10 $(VENV)/bin/tflite-train train-weights --cache $(DATA_CACHE) --out weights --threads 2

# The meta-trained EfficientNet-Lite0 @ 128 (an option of export; the default ships the ImageNet weights alone,
# tflite_train.default_weights): upper blocks meta-trained on three sources (prefix features
# cached once in build/lite0_features; about 12 min on 2 shared CPU cores), written to weights/efficientnet_lite0/.
weights-lite0: data
	bash -o pipefail -c 'nice -n 5 $(VENV)/bin/tflite-train train-weights --backbone lite0 --cache $(DATA_CACHE) \
	  --out weights/efficientnet_lite0 --threads 2 2>&1 | tee weights/efficientnet_lite0/train.log'

# The benchmarks: bench/results/BENCHMARKS.md + PNGs: the paired tables of MCUNet@64 and EfficientNet-Lite0@128
# (N = 20 tasks per target, (lr, epochs) per policy on validation tasks; one worker per core; the file states
# the measured per-task costs and the estimated wall time). The Lite0 rows use the shipped meta-trained weights;
# LITE0_WEIGHTS=path: other meta weights, or `imagenet` (every Lite0 row on the ImageNet weights).
# `make bench-quick`: the reduced preset, about half an hour.
LITE0_WEIGHTS ?=
BENCH_FLAGS = --cache $(DATA_CACHE) --out bench/results --workers $(shell nproc) $(if $(LITE0_WEIGHTS),--lite0-weights $(LITE0_WEIGHTS))
bench: data
	$(VENV)/bin/python -m tflite_train.cli bench $(BENCH_FLAGS)
bench-quick: data
	$(VENV)/bin/python -m tflite_train.cli bench --quick $(BENCH_FLAGS)
# The powered accuracy run on the default backbone (Lite0@128, N = 60 on every target; resumable: rerun it).
bench-powered: data
	$(VENV)/bin/python -m tflite_train.cli bench --preset powered $(BENCH_FLAGS)

# The README's adaptation example: docs/adapt_example.png (--plot) and docs/adapt_example.txt (the summary).
adapt-example: $(VENV)/.installed data-deps
	PY=$(VENV)/bin/python sh docs/adapt_example.sh

# Exported test models + golden self-tests, replayed by tests/runtime in both envs and read by the Java
# core (needs TF). The venv is made here only when missing (test-main refreshes a stale one), so that
# `make test-java` in a fresh git worktree does not reinstall a venv that several worktrees share.
fixtures: data-deps $(if $(wildcard $(VENV)/.installed),,$(VENV)/.installed)
	$(VENV)/bin/python -m tools.fixtures --out build/test-models

# The Pi venv first: some workstation tests (tests/converters/test_selftest_zoo.py) verify their exports on
# tflite-runtime 2.14 through it.
test-main: $(VENV)/.installed $(PI_VENV)/.installed data-deps fixtures
	$(VENV)/bin/python -m pytest tests

# Only the keras.applications zoo of tests/converters/test_selftest_zoo.py (issue 24; also part of test-main): each
# model exported with no flags, verified on both runtimes and adapted in the Pi env (about 13 min on 2 cores).
test-zoo: $(VENV)/.installed $(PI_VENV)/.installed data-deps
	$(VENV)/bin/python -m pytest tests/converters/test_selftest_zoo.py

# The on-device code, where a Pi would run it: numpy<2, tflite-runtime 2.14, no TensorFlow.
test-pi: $(PI_VENV)/.installed fixtures
	TFLITE_TRAIN_PI_ENV=1 $(PI_VENV)/bin/python -m pytest -m pi tests

# The wheel as a user installs it (tools/wheel_check.py): built from this checkout, installed with the pi extra
# into a fresh venv (verify, adapt, show and predict on a test model, in a folder outside the checkout) and with
# the train extra into another (export of the default model there, verified in the first); its file list is
# printed and checked (the package tflite_train alone: no bench, fixtures or golden generators).
test-wheel: $(VENV)/.installed fixtures
	$(VENV)/bin/python -m tools.wheel_check --python $(PYTHON) --model build/test-models/mcunet_adam_35.tflite

# The Android demo's pure-Java core, on the JVM (JDK 17 + Debian's junit4; no Gradle, no downloads
# beyond apt). Golden vectors in android_demo/core/src/test/resources/golden pin it to the Python side;
# the exported test models (fixtures) are read by the Java metadata reader too.
JAVA_CORE := android_demo/core
JAVA_OUT := build/java
JUNIT_CP := /usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar

/usr/share/java/junit4.jar:
	apt-get update -qq && apt-get install -y -qq junit4

test-java: /usr/share/java/junit4.jar fixtures
	rm -rf $(JAVA_OUT) && mkdir -p $(JAVA_OUT)/main $(JAVA_OUT)/test
	javac --release 17 -Xlint:all -Werror -d $(JAVA_OUT)/main $$(find $(JAVA_CORE)/src/main/java -name '*.java')
	javac --release 17 -Xlint:all -Werror -cp $(JAVA_OUT)/main:$(JUNIT_CP) -d $(JAVA_OUT)/test $$(find $(JAVA_CORE)/src/test/java -name '*.java')
	cp -r $(JAVA_CORE)/src/test/resources/. $(JAVA_OUT)/test/
	java -Dtflitetrain.fixtures=build/test-models -Dtflitetrain.python=$(VENV)/bin/python -cp $(JAVA_OUT)/main:$(JAVA_OUT)/test:$(JUNIT_CP) org.junit.runner.JUnitCore \
	  $$(cd $(JAVA_CORE)/src/test/java && find . -name '*Test.java' | sort | sed 's|^\./||; s|\.java$$||; s|/|.|g')

# The ONNX Runtime training peer (bench-only; never installed by `make test`): its own venv with the
# workstation pins plus requirements/bench.txt (onnx, onnxruntime-training; no torch), and the Pi env
# for the tflite-runtime column. Writes bench/results/PEER_ORT.md.
$(BENCH_VENV)/.installed: requirements/main.txt requirements/bench.txt setup.py
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/pip install --quiet -r requirements/main.txt -r requirements/bench.txt
	$(BENCH_VENV)/bin/pip install --quiet --no-deps -e .
	touch $@

bench-peer: $(BENCH_VENV)/.installed $(PI_VENV)/.installed data
	PYTHONPATH=$(CURDIR) $(BENCH_VENV)/bin/python -m bench.peer_ort --backbone mcunet --input-size 128 --cpu 0

# int8 exports of the default Lite0 @128 model against its float export (issue 27, docs/int8.md section 0):
# size, paired `infer` latency on LiteRT and on tflite-runtime 2.14's builtin kernels, embedding cosine.
INT8_DIR = build/int8
INT8_FIGURES = bench/results/int8
bench-int8: $(VENV)/.installed $(PI_VENV)/.installed data
	mkdir -p $(INT8_DIR)
	$(VENV)/bin/python -m tflite_train.cli export --out $(INT8_DIR)/float.tflite
	for mode in int8-candidates int8-weights int8; do \
	  $(VENV)/bin/python -m tflite_train.cli export --quantize $$mode --out $(INT8_DIR)/$$mode.tflite || exit 1; \
	  name=lite0_128_$$(echo $$mode | tr - _); \
	  $(VENV)/bin/python -m bench.int8_figures --float $(INT8_DIR)/float.tflite --int8 $(INT8_DIR)/$$mode.tflite \
	    --runtime litert --out $(INT8_FIGURES)/$${name}_litert.json || exit 1; \
	  PYTHONPATH=$(CURDIR) $(PI_VENV)/bin/python -m bench.int8_figures --float $(INT8_DIR)/float.tflite \
	    --int8 $(INT8_DIR)/$$mode.tflite --runtime tflite-runtime --no-xnnpack \
	    --out $(INT8_FIGURES)/$${name}_tflite_runtime_2.14_builtin.json || exit 1; \
	done

# Peak resident memory of `predict` and `adapt` by phase on both runtimes (issue 43): the default export
# (Lite0 @128), 25 tuxpaint stamps of 5 classes; writes bench/results/MEMORY.md and MEMORY.json.
# BEFORE=DIR adds the columns of an older tflite_train package (e.g. git archive main tflite_train | tar -x -C DIR).
MEMORY_DIR = build/memory
bench-memory: $(VENV)/.installed $(PI_VENV)/.installed data-deps
	mkdir -p $(MEMORY_DIR)
	$(VENV)/bin/python -m tflite_train.cli export --out $(MEMORY_DIR)/lite0_default.tflite -q
	PYTHONPATH=$(CURDIR) $(VENV)/bin/python -m bench.memory_profile --make --model $(MEMORY_DIR)/lite0_default.tflite \
	  $(if $(BEFORE),--before $(BEFORE)) --rounds 5 --out bench/results/MEMORY.md

clean-venvs:
	rm -rf $(VENV) $(PI_VENV) $(BENCH_VENV)
