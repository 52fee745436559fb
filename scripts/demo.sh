#!/usr/bin/env bash
# The main job: set up, build, and run `kiln demo` (extra arguments are passed on).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh"
exec "${KILN_BUILD_DIR:-$root/build}/bin/kiln" demo "$@"
