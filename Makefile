# fimble — the two commands that matter are `make run` and `make test` (see README.md).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.fimble-installed
DEFAULT_MODEL ?= qwen2.5-coder-1.5b
TEST_MODELS ?= qwen2.5-coder-0.5b qwen2.5-coder-1.5b
PYTEST_ARGS ?=

.PHONY: install run test test-fast test-offline lint bench models clean vsix vscode-tools rebuild-llama audit

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
	$(BIN)/ruff format --check .

# The same suite in a network namespace that has only loopback: nothing fimble or its tests run may
# need the network once installed (installing needs it, so that happens first, outside; the one test of
# the download itself, marked network, is left out). Needs root
# or unprivileged user namespaces; `unshare -rn` is the rootless form where the kernel allows it.
test-offline: install models lint vscode-tools vsix
	$(UNSHARE) sh -c 'ip link set lo up 2>/dev/null || true; exec $(BIN)/python -m pytest -m "not network" $(PYTEST_ARGS)'
UNSHARE ?= $(if $(filter 0,$(shell id -u)),unshare -n,unshare -rn)

# The supply side: a consistent installed set (pip check) and no known vulnerability in it
# (pip-audit, from PyPI's advisory data). pip-audit needs PyPI's per-release JSON API; where only the
# package index answers it finds no package, and --strict makes that a failure rather than a pass.
audit: install
	$(BIN)/python -m pip check
	$(BIN)/python -m pip install -q 'pip-audit>=2.7,<3'
	$(BIN)/pip-audit --strict --skip-editable --progress-spinner off

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
	$(BIN)/python bench/load.py

# Reliability, longer than the default suite runs it (a few rounds and sessions of each):
# `make faults` kills indexing, KV-state saves and completion-cache writes 20 times each;
# JSON under bench/results/.
# `make fuzz` runs 200 hypothesis LSP sessions and 200 schemathesis cases per HTTP operation and mode.
.PHONY: faults fuzz
faults: install
	$(BIN)/python bench/faults.py

fuzz: install models
	FIMBLE_FUZZ_SESSIONS=200 FIMBLE_FUZZ_REPORT=bench/results/fuzz_lsp.json \
		$(BIN)/python -m pytest -q tests/reliability/test_fuzz_lsp.py
	FIMBLE_FUZZ_HTTP_EXAMPLES=200 FIMBLE_FUZZ_HTTP_REPORT=bench/results/fuzz_http.json \
		$(BIN)/python -m pytest -q tests/server/http/test_schema.py

.PHONY: docs plots
# The generated pages of the manual (configuration and HTTP API references, the architecture picture),
# from the code they describe; tests/test_docs.py fails when the committed ones are out of date.
docs: install
	$(BIN)/python docs/generate.py

# The speed plots of docs/performance.md, from the JSON under bench/results/ (matplotlib: the plots extra).
plots: install
	$(BIN)/python -m pip install -q -e '.[plots]'
	$(BIN)/python bench/plots/make_plots.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
