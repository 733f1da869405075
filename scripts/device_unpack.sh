#!/bin/bash
# scripts/device_unpack.sh: on the device machine, unpacks build-device/pack/bins.tar.xz (written by
# scripts/device_pack.sh) into build-device/bin with Python's tarfile, and puts hla where cli_tests,
# built in /tmp/devbuild, runs it from.
set -u
cd "$(dirname "$0")/.." || exit 2
[ -f build-device/pack/bins.tar.xz ] || { echo "device_unpack: no build-device/pack/bins.tar.xz (carry it)" >&2; exit 2; }
python3 -c "import tarfile; tarfile.open('build-device/pack/bins.tar.xz').extractall('build-device/bin')" || exit 1
if [ -f build-device/bin/hla ]; then
  mkdir -p /tmp/devbuild && cp build-device/bin/hla /tmp/devbuild/hla || exit 1
fi
ls build-device/bin
