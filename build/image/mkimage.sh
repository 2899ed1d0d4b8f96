#!/bin/bash
# mkimage.sh ARCH VERSION GANTRY_BIN BASE_TAR WORKDIR OUTDIR [UPDATE_PUBKEY]
#
# Builds the appliance disk image from the cached base OS: lays the gantry
# binary, systemd/ and rootfs/ into the root file system, then assembles
# a GPT disk without loop devices or mounts (mkfs -d, mtools, dd):
#
#   1 esp     256 MiB  systemd-boot, loader entries, /a and /b kernels
#   2 root-a  ROOT_MB  ext4, the factory root
#   3 root-b  ROOT_MB  empty; an update writes it
#   4 data    256 MiB  ext4, /data: broker state and configuration, /var;
#                      grows to the end of the medium on first boot
#
# Writes OUTDIR/gantry-VERSION-ARCH.img.zst and .img.zst.sha256, and keeps
# WORKDIR/root.ext4 (build/_work/ARCH) for make bundle. UPDATE_PUBKEY (a PEM public key) is
# the key update bundles must be signed with; without one the image
# refuses every update bundle. LOADER_EFI, when set, is the systemd-boot
# EFI binary to put on the ESP instead of the root file system's own
# (armv7: see loader.sh).
set -euo pipefail
arch=$1 version=$2 bin=$3 base=$4 work=$5 outdir=$6 pubkey=${7:-}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
case $arch in
amd64) efi=systemd-bootx64.efi bootefi=BOOTX64.EFI console="console=tty0 console=ttyS0,115200"
	rtype=4f68bce3-e8cd-4db1-96e7-fbcaf984b709 ;;
arm64) efi=systemd-bootaa64.efi bootefi=BOOTAA64.EFI console="console=ttyAMA0,115200"
	rtype=b921b045-1df0-41c3-af44-4c6f280d3fae ;;
armv7) efi=systemd-bootarm.efi bootefi=BOOTARM.EFI console="console=ttyAMA0,115200"
	rtype=69dad710-2ce4-4e3c-b16c-21a1d49abed3 ;;
*) echo "mkimage.sh: ARCH=$arch, want amd64, arm64 or armv7" >&2; exit 2 ;;
esac
ROOT_MB=${ROOT_MB:-1024} ESP_MB=256 DATA_MB=256
t0=$(date +%s%N)
step() { local ms=$((($(date +%s%N) - t0) / 1000000)); printf '[%4d.%d s] %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$*"; }

rm -rf "$work"; mkdir -p "$work" "$outdir"
root=$work/rootfs
mkdir -p "$root"
step "unpack base $(basename "$base")"
tar -C "$root" --numeric-owner -xpf "$base"

step "app layer"
install -D -m 0755 "$bin" "$root/usr/bin/gantry"
cp -a "$repo/rootfs/." "$root/"
install -d "$root/etc/systemd/system"
install -m 0644 "$repo"/systemd/*.service "$repo"/systemd/*.socket "$root/etc/systemd/system/"
install -d "$root/etc/gantry/update-keys" "$root/usr/share/doc/gantry" "$root/efi" "$root/data"
[ -z "$pubkey" ] || install -m 0644 "$pubkey" "$root/etc/gantry/update-keys/update.pem"
install -m 0644 "$repo/docs/appliance.md" "$root/usr/share/doc/gantry/" 2>/dev/null || true
echo "gantry-$arch" > "$root/etc/gantry/compatible"
echo "$version" > "$root/etc/gantry/version"
echo "$console panic=10" > "$root/etc/gantry/cmdline"
# The root is mounted read-only (ro on the kernel command line). What
# changes lives on the data partition: /var is /data/var (the journal,
# systemd's state), broker state is /data/gantry; /tmp is a tmpfs.
cat > "$root/etc/fstab" <<FSTAB
PARTLABEL=esp   /efi   vfat   umask=0077,noatime  0 0
PARTLABEL=data  /data  ext4   noatime             0 2
/data/var       /var   none   bind,x-systemd.requires=gantry-data-dirs.service  0 0
tmpfs           /tmp   tmpfs  mode=1777,nosuid,nodev  0 0
FSTAB
: > "$root/etc/machine-id"            # the first boot makes one; gantry-identity keeps it on /data
rm -f "$root/etc/hostname"             # gantry-identity makes one
ln -sf /run/systemd/resolve/stub-resolv.conf "$root/etc/resolv.conf"
systemd-sysusers --root="$root" >/dev/null
systemctl --root="$root" enable gantry.service gantry-http.socket gantry-boot-check.service \
	gantry-bless.service gantry-identity.service gantry-grow-data.service systemd-networkd.service systemd-resolved.service \
	systemd-timesyncd.service >/dev/null 2>&1
# Our own gantry-bless replaces systemd-bless-boot (see gantry-bless.service).
ln -sf /dev/null "$root/etc/systemd/system/systemd-bless-boot.service"
usermod --root "$root" -p '!' root     # no password login; see docs/appliance.md

step "root file system"
kver=$(basename "$(ls "$root"/boot/vmlinuz-* | head -1)" | sed 's/^vmlinuz-//')
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$work/initrd"
mkfs.ext4 -q -F -L root-a -E root_owner=0:0 -d "$root" "$work/root.ext4" "${ROOT_MB}M"
mkdir -p "$work/data/var"
mkfs.ext4 -q -F -L data -E root_owner=0:0 -d "$work/data" "$work/data.ext4" "${DATA_MB}M"

step "ESP"
esp=$work/esp.vfat
mkfs.vfat -F 32 -n ESP -C "$esp" $((ESP_MB * 1024)) >/dev/null
mmd -i "$esp" ::/EFI ::/EFI/BOOT ::/loader ::/loader/entries ::/a ::/b
loader=${LOADER_EFI:-$root/usr/lib/systemd/boot/efi/$efi}
step "ESP: $(grep -aom1 'LoaderInfo: [^#]*' "$loader" | cut -c13-)($(basename "$loader"))"
mcopy -i "$esp" "$loader" "::/EFI/BOOT/$bootefi"
printf 'timeout 0\neditor no\nauto-entries no\nauto-firmware no\n' > "$work/loader.conf"
mcopy -i "$esp" "$work/loader.conf" ::/loader/loader.conf
mcopy -i "$esp" "$work/vmlinuz" ::/a/vmlinuz
mcopy -i "$esp" "$work/initrd" ::/a/initrd
printf 'title Gantry %s (slot a)\nversion %s\nlinux /a/vmlinuz\ninitrd /a/initrd\noptions root=PARTLABEL=root-a ro gantry.slot=a %s panic=10\n' \
	"$version" "$version" "$console" > "$work/entry"
mcopy -i "$esp" "$work/entry" ::/loader/entries/gantry-1-a.conf

step "GPT disk"
img=$work/gantry.img
mib=$((1024 * 1024))
total=$((1 + ESP_MB + 2 * ROOT_MB + DATA_MB + 1))
rm -f "$img"; truncate -s $((total * mib)) "$img"
sfdisk -q "$img" <<GPT
label: gpt
first-lba: 2048
start=2048, size=$((ESP_MB * 2048)), type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=esp
size=$((ROOT_MB * 2048)), type=$rtype, name=root-a
size=$((ROOT_MB * 2048)), type=$rtype, name=root-b
size=$((DATA_MB * 2048)), type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=data
GPT
dd if="$esp" of="$img" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="$work/root.ext4" of="$img" bs=1M seek=$((1 + ESP_MB)) conv=notrunc,sparse status=none
dd if="$work/data.ext4" of="$img" bs=1M seek=$((1 + ESP_MB + 2 * ROOT_MB)) conv=notrunc,sparse status=none

step "compress"
name=gantry-$version-$arch.img.zst
zstd -q -f -T0 -10 --long=30 "$img" -o "$outdir/$name"
(cd "$outdir" && sha256sum "$name" > "$name.sha256")
step "done: $outdir/$name ($(du -m "$outdir/$name" | cut -f1) MB compressed, $((total)) MiB raw, root file system $(du -sm "$root" | cut -f1) MB)"
