#!/bin/bash
# image-test.sh VERSION — make image-test: builds the amd64 image trusting a
# throwaway update key, then runs build/boot's TestImage on it.
set -euo pipefail
version=$1
cd "$(dirname "$0")/../.."
keys=build/work/test-keys
mkdir -p "$keys"
[ -s "$keys/update.key" ] || openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072 -out "$keys/update.key" 2>/dev/null
openssl pkey -in "$keys/update.key" -pubout -out "$keys/update.pem"
start=$(date +%s)
make --no-print-directory image ARCH=amd64 VERSION="$version" UPDATE_PUBKEY="$keys/update.pem"
echo "make image ARCH=amd64: $(( $(date +%s) - start )) s"
GANTRY_BOOT=image GANTRY_IMAGE="$PWD/build/out/gantry-$version-amd64.img.zst" \
GANTRY_ROOTFS="$PWD/build/work/amd64/rootfs" GANTRY_ROOT_EXT4="$PWD/build/work/amd64/root.ext4" \
GANTRY_SIGNING_KEY="$PWD/$keys/update.key" GANTRY_BIN="$PWD/bin" GANTRY_VERSION="$version" \
	go test -count=1 -v -timeout 60m -run 'TestImage$' ./build/boot/
