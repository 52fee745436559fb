#!/usr/bin/env bash
# Shared set-up of the README commands: installs the Debian/Ubuntu packages kiln needs (only the
# missing ones, through apt-get as root or sudo), then configures and builds Release into build/.
# Idempotent: a second run with nothing changed installs nothing and rebuilds nothing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KILN_BUILD_DIR:-$root/build}

packages=(build-essential cmake lld libhalide14-0-dev libeigen3-dev libboost-test-dev libgloo-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kiln setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "kiln setup: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    sudo=sudo
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs=$(nproc 2>/dev/null || echo 2)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
fi
echo "kiln setup: building in $build with $jobs jobs (the first build generates the eager kernels: a few minutes)"
cmake --build "$build" -j "$jobs"
