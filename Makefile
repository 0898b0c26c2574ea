# fimble — the two commands that matter are `make run` and `make test` (see README.md).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.fimble-installed
DEFAULT_MODEL ?= qwen2.5-coder-1.5b
TEST_MODELS ?= qwen2.5-coder-0.5b qwen2.5-coder-1.5b
PYTEST_ARGS ?=

.PHONY: install run test test-fast lint bench models clean vsix vscode-tools rebuild-llama

install: $(STAMP)

# llama-cpp-python compiles llama.cpp for the CPU it builds on (-march=native), and pip's wheel cache
# knows the sdist, not that CPU: a wheel compiled on another machine dies here of SIGILL. So its wheel
# is cached per CPU (a digest of the CPU's flags); every other package uses pip's usual cache.
LLAMA_CPP := $(shell sed -n 's/^ *"\(llama-cpp-python==[^"]*\)".*/\1/p' pyproject.toml)
CPU_ID := $(shell (grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null || uname -m) | cksum | cut -d' ' -f1)
LLAMA_WHEELS ?= $(HOME)/.cache/fimble/llama-wheels/$(CPU_ID)

# Re-run pip only when the project's dependencies change; llama-cpp-python compiles once per CPU.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip install -q --cache-dir '$(LLAMA_WHEELS)' '$(LLAMA_CPP)'
	$(BIN)/python -m pip install -q -e '.[all]'
	touch $(STAMP)

# Compile llama.cpp again for this machine, trusting no cached wheel: the fix `fimble doctor` names
# when the installed build crashes on this CPU (SIGILL: it was compiled for another one).
rebuild-llama:
	test -x $(BIN)/python || $(MAKE) install
	CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip install -q --force-reinstall --no-deps \
		--no-cache-dir --no-binary llama-cpp-python '$(LLAMA_CPP)'
	$(BIN)/fimble doctor --reprobe

models: install
	@for m in $(TEST_MODELS); do $(BIN)/fimble models pull $$m || exit 1; done

LSP_ADDR ?= 127.0.0.1:2087
HTTP_ADDR ?= 127.0.0.1:8080

# Pull the default model, show one completion from the command line, then run the server: LSP on TCP and
# HTTP, after it has served itself one real completion through its own LSP socket.
run: install
	$(BIN)/fimble models pull $(DEFAULT_MODEL)
	$(BIN)/fimble complete fimble/examples/dates.py:8:22 --model $(DEFAULT_MODEL)
	$(BIN)/fimble serve --model $(DEFAULT_MODEL) --tcp $(LSP_ADDR) --http $(HTTP_ADDR) \
		--self-test fimble/examples/dates.py:8:22

test: install models lint vscode-tools vsix
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The VS Code extension as editors/vscode/fimble.vsix (Node 24, esbuild, @vscode/vsce); rebuilt when it changes.
VSCODE_EXT := editors/vscode
vsix: $(VSCODE_EXT)/fimble.vsix
$(VSCODE_EXT)/fimble.vsix: $(addprefix $(VSCODE_EXT)/,package.json package-lock.json tsconfig.json) $(wildcard $(VSCODE_EXT)/src/*.ts)
	export PATH="$$(tests/editors/vscode/setup.sh --node):$$PATH" && cd $(VSCODE_EXT) && \
		npm ci --no-audit --no-fund --prefer-offline --loglevel=error && npm run -s package

# What the VS Code end-to-end test needs (code-server, playwright-core, chromium), cached in ~/.cache/fimble-editors.
vscode-tools:
	@tests/editors/vscode/setup.sh > /dev/null

# Unit tests only: no model, seconds.
test-fast: install
	$(BIN)/python -m pytest -m "not model and not slow" $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .

# Benchmarks write JSON under bench/results/. The index benchmark compares with Universal Ctags when it is
# installed (apt-get install universal-ctags) and records a skip otherwise.
bench: install models
	$(BIN)/python bench/engine.py
	$(BIN)/python bench/keystroke.py
	$(BIN)/python bench/speculative.py
	$(BIN)/python bench/index.py
	$(BIN)/python bench/models.py
	$(BIN)/python bench/shape.py
	$(BIN)/python bench/stops.py
	$(BIN)/python bench/restart.py
	$(BIN)/python bench/typing_replay.py

# The generated pages of the manual (configuration and HTTP API references, the architecture picture),
# from the code they describe; tests/test_docs.py fails when the committed ones are out of date.
.PHONY: docs plots
docs: install
	$(BIN)/python docs/generate.py

# The speed plots of docs/performance.md, from the JSON under bench/results/ (matplotlib: the plots extra).
plots: install
	$(BIN)/python -m pip install -q -e '.[plots]'
	$(BIN)/python bench/plots/make_plots.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
