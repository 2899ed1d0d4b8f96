#!/bin/bash
# loader.sh DEBARCH CACHE_DIR — prints the path of a systemd-boot EFI
# loader for DEBARCH taken from bookworm-backports' systemd-boot-efi,
# downloaded once into CACHE_DIR (delete it there to pick up a newer one).
#
# The armv7 image needs it: Debian 12's systemd-boot 252 formats the name
# it renames a counting entry to with gnu-efi's "%u" but passes 64-bit
# counters. On x86-64 and arm64 that reads the low half of each; on
# 32-bit ARM (AAPCS puts a 64-bit vararg in an even register pair) every
# argument after the file name shifts by one word, so gantry-2-b+3.conf
# becomes the file "gantry-2-b+0-2(null)": no longer an entry, and its try
# counter is gone. 253 and later format with PRIu64 ("%.*ls%llu-%llu%ls").
# Only the EFI binary is taken; the root file system keeps Debian 12's
# systemd (the loader's protocol, loader/entries/*.conf and the
# LoaderBootCountPath variable, is the same).
set -euo pipefail
debarch=$1 cache=$2
case $debarch in
armhf) efi=systemd-bootarm.efi ;;
*) echo "loader.sh: DEBARCH=$debarch: only armhf needs a loader from backports" >&2; exit 2 ;;
esac
mkdir -p "$cache"
deb=$(ls "$cache"/systemd-boot-efi_*_"$debarch".deb 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$deb" ]; then
	apt=$(mktemp -d)
	trap 'rm -rf "$apt"' EXIT
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-backports main" > "$apt/sources.list"
	opts=(-o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o APT::Sandbox::User=root
		-o APT::Architectures::="$debarch" -o APT::Architecture="$debarch")
	apt-get "${opts[@]}" -qq update >&2
	(cd "$apt" && apt-get "${opts[@]}" -qq download "systemd-boot-efi:$debarch" >&2)
	got=$(ls "$apt"/systemd-boot-efi_*_"$debarch".deb)
	echo "loader.sh: fetched $(basename "$got") from bookworm-backports" >&2
	mv "$got" "$cache/"
	deb=$cache/$(basename "$got")
fi
out=${deb%.deb}.$efi
if [ ! -s "$out" ]; then
	x=$(mktemp -d)
	dpkg-deb -x "$deb" "$x"
	install -m 0644 "$x/usr/lib/systemd/boot/efi/$efi" "$out.new"
	rm -rf "$x"
	mv "$out.new" "$out"
fi
echo "$out"
