#!/usr/bin/env bash
# A machine whose CPU advertises AMX that faults, simulated on any x86-64 with AVX-512 (seen on cloud
# VMs: the kernel grants the AMX permission, yet the first tile instruction kills the process):
#   1. llama-cpp-python compiled with ggml's AMX kernels, into its own venv (never pip's wheel cache:
#      that build would then be reused by `make install`),
#   2. fake_amx.c, an LD_PRELOAD shim that answers arch_prctl(ARCH_REQ_XCOMP_PERM) with "granted".
# On a CPU without AMX the first AMX kernel then dies of SIGILL (ldtilecfg), as the real one dies of a
# fault. Run fimble on it with the checkout's venv and this llama_cpp in front:
#   eval "$(bench/amx_sim/setup.sh)"    # prints the two exports, after building once (~7 min)
#   .venv/bin/fimble doctor             # cpu-path: no-amx: AMX advertised but not usable here ...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${AMX_SIM_DIR:-$HOME/.cache/fimble/amx-sim}
pin=$(sed -n 's/^ *"\(llama-cpp-python==[^"]*\)".*/\1/p' "$here/../../pyproject.toml")
mkdir -p "$out"
if [ ! -x "$out/venv/bin/python" ] || ! "$out/venv/bin/python" -c 'import llama_cpp' 2>/dev/null; then
  python3 -m venv "$out/venv"
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON \
-DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
-DGGML_AVX512_VBMI=ON -DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON -DGGML_AMX_BF16=ON" \
    "$out/venv/bin/pip" install -q --no-cache-dir --no-binary llama-cpp-python "$pin" >&2
fi
[ "$out/libfakeamx.so" -nt "$here/fake_amx.c" ] || gcc -shared -fPIC -O2 -Wall -o "$out/libfakeamx.so" "$here/fake_amx.c" -ldl
site=$("$out/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "export PYTHONPATH=$site LD_PRELOAD=$out/libfakeamx.so"
