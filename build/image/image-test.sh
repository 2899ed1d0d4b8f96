#!/bin/bash
# image-test.sh VERSION [ARCH [full|boot]] — make image-test: builds the
# image trusting a throwaway update key, then runs build/boot's tests on
# it: full (the default) is the whole life cycle (TestImage: factory boot,
# good update blessed, watchdog, broken update rolled back); boot is the
# factory boot alone (TestImageBoot).
set -euo pipefail
version=$1 arch=${2:-amd64} what=${3:-full}
cd "$(dirname "$0")/../.."
keys=build/_work/test-keys
mkdir -p "$keys"
[ -s "$keys/update.key" ] || openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072 -out "$keys/update.key" 2>/dev/null
openssl pkey -in "$keys/update.key" -pubout -out "$keys/update.pem"
start=$(date +%s)
make --no-print-directory image ARCH="$arch" VERSION="$version" UPDATE_PUBKEY="$keys/update.pem"
echo "make image ARCH=$arch: $(( $(date +%s) - start )) s"
run=TestImage$ arches=""
[ "$what" = full ] || { run=TestImageBoot$; arches=$arch; }
make --no-print-directory build ARCH=amd64 VERSION="$version"   # the host binary provisions the data partition
GANTRY_BOOT=image GANTRY_IMAGE="$PWD/build/out/gantry-$version-$arch.img.zst" GANTRY_IMAGE_ARCHES="$arches" \
GANTRY_ROOTFS="$PWD/build/_work/$arch/rootfs" GANTRY_ROOT_EXT4="$PWD/build/_work/$arch/root.ext4" \
GANTRY_SIGNING_KEY="$PWD/$keys/update.key" GANTRY_BIN="$PWD/bin" GANTRY_VERSION="$version" \
	go test -count=1 -v -timeout 150m -run "$run" ./build/boot/
