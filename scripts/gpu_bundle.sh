#!/usr/bin/env bash
# Builds kiln here and packs what a GPU machine without Halide needs into gpu-bundle/ (under
# 64 MiB): the kiln command line and the CUDA test programs (stripped, in one xz archive), the
# kernel summary library (lib/, stripped, xz-compressed; built where CUPTI is found), Debian's
# runtime libraries of Halide 14, LLVM 14 and Boost.Test (.deb files, unpacked there without
# installing), and gpu-bundle/run.sh. On the GPU machine, from a copy of this source tree with
# gpu-bundle/ in it:
#
#   bash gpu-bundle/run.sh [RESULTS_DIR]     # CUDA tests, kiln bench gpu, PyTorch side by side
#
# The machine needs an NVIDIA driver, cuBLAS (/usr/local/cuda/lib64 or the library path) and, for
# the PyTorch half, python3 with torch. Results: RESULTS_DIR (default gpu-results/, or $OUT).
#
# KILN_BUNDLE_PROGRAMS="kiln test_cuda_aot_model ..." packs those programs instead of the default
# list (a smaller bundle for one job). KILN_BUNDLE_AOT=1 adds examples/aot's kiln_aot_example and
# kiln_aot_check, built against an installed kiln by tests/install/check_install.sh, with their
# models' weights in gpu-bundle/aot/ (run them with --weights gpu-bundle/aot).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KILN_BUILD_DIR:-$root/build}
bundle=$root/gpu-bundle
bash "$root/scripts/setup.sh"
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/debs"
if [ -n "${KILN_BUNDLE_PROGRAMS:-}" ]; then
  read -r -a programs <<< "$KILN_BUNDLE_PROGRAMS"
else
  programs=(kiln example_profiling example_05_custom_op)
  for t in "$build"/bin/test_cuda_*; do programs+=("$(basename "$t")"); done
fi
# One solid archive: the programs share most of their code (kiln and its kernels), which a
# dictionary larger than one program stores once.
staged=$(mktemp -d)
for p in "${programs[@]}"; do strip -o "$staged/$p" "$build/bin/$p"; done
if [ "${KILN_BUNDLE_AOT:-0}" = 1 ]; then
  aot=$(mktemp -d)
  KILN_AOT_KEEP="$aot" bash "$root/tests/install/check_install.sh" "$build" >/dev/null
  for p in kiln_aot_example kiln_aot_check; do strip -o "$staged/$p" "$aot/$p"; programs+=("$p"); done
  mkdir -p "$bundle/aot"
  cp "$aot"/*.safetensors "$bundle/aot/"
  rm -rf "$aot"
fi
tar -C "$staged" -cf - "${programs[@]}" | xz -T1 --lzma2=preset=6,dict=160MiB > "$bundle/bin/programs.tar.xz"
rm -rf "$staged"
summary_lib=libkiln_kernel_summary.so
if [ -e "$build/lib/$summary_lib" ]; then
  strip -o "$bundle/lib/$summary_lib" "$build/lib/$summary_lib"
  xz -T0 -6 "$bundle/lib/$summary_lib"
fi
# Gloo (kiln's CPU collectives) with what it links: the GPU machine's Ubuntu lacks them.
debs=(libhalide14-0 libllvm14 libz3-4 libboost-test1.74.0 libgloo0 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200)
(cd "$bundle/debs" && apt-get download "${debs[@]}" >/dev/null 2>&1) || {
  echo "gpu_bundle: apt-get download of ${debs[*]} failed (run apt-get update?)" >&2
  exit 1
}
cp "$root/scripts/on_gpu.sh" "$bundle/run.sh"
size=$(du -sm "$bundle" | cut -f1)
echo "gpu-bundle/: ${size} MiB (${programs[*]}; $(ls "$bundle/debs" | tr '\n' ' '))"
if [ "$size" -ge 64 ]; then echo "gpu_bundle: over 64 MiB" >&2; exit 1; fi
echo "on the GPU machine, from this tree: bash gpu-bundle/run.sh [RESULTS_DIR]"
