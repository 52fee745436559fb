#!/usr/bin/env bash
# Set up, build, and run the whole test suite through ctest (extra arguments go to ctest,
# e.g. `scripts/test.sh -L cpu` or `-R dsl_matmul`).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KILN_BUILD_DIR:-$root/build}
bash "$root/scripts/setup.sh"
cd "$build"
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
