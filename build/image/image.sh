#!/bin/bash
# image.sh ARCH VERSION GANTRY_BIN [UPDATE_PUBKEY] — what make image runs:
# the base OS from the cache (built by base.sh when its hash is new), then
# mkimage.sh into build/_work/ARCH (ignored by go ./..., like every _dir) and build/out;
# for armv7 the boot loader from bookworm-backports (loader.sh, cached too).
set -euo pipefail
arch=$1 version=$2 bin=$3 pubkey=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
cache=${GANTRY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gantry}
key=$(sha256sum "$here/base.sh" | cut -c1-12)
base=$cache/base-$arch-$key.tar
mkdir -p "$cache"
if [ ! -s "$base" ]; then
	echo "base OS for $arch not cached ($base): building it with mmdebstrap"
	start=$(date +%s)
	# mmdebstrap picks its output format from the name: keep .tar last.
	"$here/base.sh" "$arch" "${base%.tar}.new.tar"
	mv "${base%.tar}.new.tar" "$base"
	echo "base OS for $arch: $(( $(date +%s) - start )) s, $(du -m "$base" | cut -f1) MB"
fi
# armv7 boots a newer systemd-boot than Debian 12's (see loader.sh).
loader=""
[ "$arch" != armv7 ] || loader=$("$here/loader.sh" armhf "$cache")
build=$(dirname "$here")   # systemctl --root wants a path without ".."
LOADER_EFI=$loader "$here/mkimage.sh" "$arch" "$version" "$bin" "$base" "$build/_work/$arch" "$build/out" "$pubkey"
