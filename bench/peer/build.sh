#!/usr/bin/env bash
# Build llama.cpp's own `llama-server` from the very llama.cpp tree that fimble runs on.
#
# Why: the peer benchmark compares fimble with llama-server driven the way llama.vim drives it. The
# comparison is only fair on the same inference engine, so the server is compiled from the llama.cpp
# vendored inside the llama-cpp-python sdist pinned in pyproject.toml, never from another checkout,
# and no llama.cpp source is kept in this repository: it is fetched from PyPI at build time.
#
# Output: the binary's path, as the last line on stdout. Progress goes to stderr.
#   bash bench/peer/build.sh            # build once; later runs reuse the binary
#   PEER_DIR=/some/dir bash bench/peer/build.sh
#   PEER_FORCE=1 bash bench/peer/build.sh   # rebuild even when a working binary exists
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
log() { printf 'peer/build: %s\n' "$*" >&2; }

# The pin is read from pyproject.toml the same way the Makefile reads it, so the two never disagree.
pin="$(sed -n 's/^ *"\(llama-cpp-python==[^"]*\)".*/\1/p' "$root/pyproject.toml")"
if [[ -z "$pin" ]]; then
    log "no llama-cpp-python==X pin found in $root/pyproject.toml"
    exit 1
fi
version="${pin#llama-cpp-python==}"

peer_dir="${PEER_DIR:-$HOME/.cache/fimble/peer}"
dest="$peer_dir/$pin"
bin="$dest/llama-server"

# GGML_NATIVE compiles for this CPU (-march=native): a binary built on another CPU may die of SIGILL
# in the middle of a run rather than at --version, so the CPU it was built for is kept beside it.
cpu_id="$( (grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null || uname -m) | cksum | cut -d' ' -f1)"

if [[ -z "${PEER_FORCE:-}" && -x "$bin" && "$(cat "$dest/cpu-id" 2>/dev/null)" == "$cpu_id" ]] \
    && "$bin" --version >/dev/null 2>&1; then
    log "reusing $bin ($("$bin" --version 2>&1 | grep -m1 version || true))"
    printf '%s\n' "$bin"
    exit 0
fi

for tool in cmake c++ cc; do
    command -v "$tool" >/dev/null || { log "needs $tool (apt-get install cmake build-essential)"; exit 1; }
done

py="$root/.venv/bin/python"
[[ -x "$py" ]] || py="$(command -v python3)"

work="$(mktemp -d "${TMPDIR:-/tmp}/fimble-peer-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

log "fetching the $pin sdist"
"$py" -m pip download -q --no-deps --no-binary :all: "$pin" -d "$work/sdist" >&2
sdist="$(find "$work/sdist" -maxdepth 1 -name 'llama_cpp_python-*.tar.gz' | head -n1)"
[[ -n "$sdist" ]] || { log "pip download produced no sdist in $work/sdist"; exit 1; }
tar -xzf "$sdist" -C "$work"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
[[ -f "$src/tools/server/CMakeLists.txt" ]] || { log "no llama.cpp server sources at $src"; exit 1; }

# Options, as named in the vendored CMakeLists.txt:
#   BUILD_SHARED_LIBS=OFF        one self-contained binary; nothing to copy beside it or put on LD_LIBRARY_PATH
#   LLAMA_BUILD_TOOLS/SERVER=ON  llama-server lives under tools/server
#   LLAMA_BUILD_APP=OFF          the unified `llama` binary is not wanted
#   LLAMA_OPENSSL=OFF            the peer only listens on 127.0.0.1 and downloads nothing
#   LLAMA_BUILD_UI=OFF, LLAMA_USE_PREBUILT_UI=OFF
#                                the web UI would be built with npm or downloaded at build time; the
#                                server then embeds an empty asset table, which /infill does not need
#   LLAMA_CURL=OFF               deprecated in this tree (warns), kept for older pins
log "configuring $src"
cmake -S "$src" -B "$work/build" -G "Unix Makefiles" \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF \
    >&2

start=$SECONDS
log "building llama-server with $(nproc) jobs (several minutes on 2 cores)"
cmake --build "$work/build" --config Release --target llama-server -j"$(nproc)" >&2
log "built in $((SECONDS - start)) s"

built="$work/build/bin/llama-server"
[[ -x "$built" ]] || { log "no binary at $built"; exit 1; }
mkdir -p "$dest"
# Copy, then rename: a reader never sees a half-written binary.
cp "$built" "$bin.tmp"
mv -f "$bin.tmp" "$bin"
printf '%s\n' "$cpu_id" >"$dest/cpu-id"
"$bin" --version >&2
printf '%s\n' "$bin"
