#!/bin/bash
# mkbundle.sh ARCH VERSION ROOT_EXT4 SIGNING_KEY OUT.bundle
#
# A Gantry update bundle: a tar of manifest, manifest.sig and root.img.zst
# (see rootfs/usr/sbin/gantry-update, which installs it). SIGNING_KEY is a
# PEM private key kept off the repository (and ideally off the build
# machine); the image trusts its public half (make image UPDATE_PUBKEY=).
set -euo pipefail
arch=$1 version=$2 root=$3 key=$4 out=$5
[ -r "$key" ] || { echo "mkbundle.sh: signing key $key not readable (make bundle SIGNING_KEY=...)" >&2; exit 2; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# The smallest file system that holds the root: less to write on the device.
cp --sparse=always "$root" "$work/root.ext4"
e2fsck -fy "$work/root.ext4" >/dev/null 2>&1 || true
resize2fs -M "$work/root.ext4" >/dev/null 2>&1
root=$work/root.ext4
zstd -q -T0 -10 "$root" -o "$work/root.img.zst"
cat > "$work/manifest" <<M
format=gantry-bundle-1
compatible=gantry-$arch
version=$version
root-sha256=$(sha256sum "$root" | cut -d' ' -f1)
root-size=$(stat -c %s "$root")
built=$(date -u +%FT%TZ)
M
openssl dgst -sha256 -sign "$key" -out "$work/manifest.sig" "$work/manifest"
tar -C "$work" -cf "$out.new" manifest manifest.sig root.img.zst
mv "$out.new" "$out"
echo "bundle $out: $(du -m "$out" | cut -f1) MB, version $version for gantry-$arch"
