#!/usr/bin/env bash
# Installs the kiln build tree BUILD into a temporary prefix, builds tests/install and
# examples/aot (an ahead-of-time model through kiln_add_model) against it as projects of their
# own (find_package(kiln)), runs them (the AOT example's outputs checked against kiln::compile),
# checks that the AOT example needs neither libHalide nor LLVM, and that the installed package
# refers to nothing in the build or source tree.
# Usage: check_install.sh BUILD
# With KILN_AOT_KEEP=DIR, the AOT example's programs and its models' weights are copied to DIR
# (scripts/gpu_bundle.sh takes them to the GPU machine, which has no Halide to build them).
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
source_root=$(cd "$here/../.." && pwd)
if grep -rl -e "$build" -e "$source_root" "$work/prefix/lib/cmake/kiln"; then
  echo "the installed CMake package refers to the build or source tree (files above)" >&2
  exit 1
fi
cmake -S "$here" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
KILN_CACHE_DIR="$work/cache" "$work/build/kiln_install_check"
cmake -S "$source_root/examples/aot" -B "$work/aot" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
KILN_CACHE_DIR="$work/cache" cmake --build "$work/aot" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
KILN_CACHE_DIR="$work/cache" "$work/aot/kiln_aot_example" "$work/aot-out"
KILN_CACHE_DIR="$work/cache" "$work/aot/kiln_aot_check" "$work/aot-out"
# The example runs on kiln::runtime: no libHalide and no LLVM among the libraries it needs.
needed=$(readelf -d "$work/aot/kiln_aot_example" | grep NEEDED || true)
if echo "$needed" | grep -i -E "halide|llvm"; then
  echo "kiln_aot_example needs libHalide or LLVM (above); it should link kiln::runtime only" >&2
  exit 1
fi
echo "kiln_aot_example needs: $(echo "$needed" | sed 's/.*\[\(.*\)\]/\1/' | tr '\n' ' ')"
if [ -n "${KILN_AOT_KEEP:-}" ]; then
  mkdir -p "$KILN_AOT_KEEP"
  cp "$work/aot/kiln_aot_example" "$work/aot/kiln_aot_check" "$KILN_AOT_KEEP"/
  cp "$work"/aot/*.kiln/*.safetensors "$KILN_AOT_KEEP"/
fi
