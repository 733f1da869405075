#!/usr/bin/env bash
# Installs the Debian 12 packages the toolkit needs (only those missing), then configures and
# builds into build/. Run from anywhere; uses sudo when not root.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ make cmake libboost-dev libeigen3-dev librapidcheck-dev catch2 libgmp-dev libmpfr-dev libcli11-dev
  clang-14 libclang-rt-14-dev python3-matplotlib pybind11-dev python3-dev python3-pytest)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
