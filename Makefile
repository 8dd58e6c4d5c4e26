# Two entry points (see README): `make demo` and `make test`. Both create what they need.
PYTHON ?= python3
VENV := .venv
PI_VENV := .venv-pi

.PHONY: demo test test-main test-pi fixtures clean-venvs

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

demo: $(VENV)/.installed
	$(VENV)/bin/tflite-train demo

test: test-main test-pi

# Exported test models + golden self-tests, replayed by tests/runtime in both envs (needs TF).
fixtures: $(VENV)/.installed
	$(VENV)/bin/python -m converters.fixtures --out build/test-models

test-main: $(VENV)/.installed fixtures
	$(VENV)/bin/python -m pytest tests

# The on-device code, where a Pi would run it: numpy<2, tflite-runtime 2.14, no TensorFlow.
test-pi: $(PI_VENV)/.installed fixtures
	TFLITE_TRAIN_PI_ENV=1 $(PI_VENV)/bin/python -m pytest -m pi tests

clean-venvs:
	rm -rf $(VENV) $(PI_VENV)
