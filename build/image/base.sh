#!/bin/bash
# base.sh ARCH OUT.tar — the appliance's base OS: Debian 12 with systemd,
# a kernel and its initramfs, built by mmdebstrap. It depends only on this
# file, so make image caches it (keyed on this file's hash) and rebuilds it
# when the list changes; delete the cache to pick up security updates.
set -euo pipefail
arch=$1 out=$2
case $arch in
amd64) deb=amd64 kernel=linux-image-amd64
	mods="virtio_blk virtio_pci virtio_scsi nvme ahci sd_mod usb_storage uas xhci_pci ehci_pci mmc_block sdhci_pci sdhci_acpi ext4" ;;
arm64) deb=arm64 kernel=linux-image-arm64
	mods="virtio_blk virtio_mmio virtio_pci nvme ahci sd_mod usb_storage uas xhci_plat_hcd mmc_block sdhci_of_arasan sdhci_iproc dw_mmc_rockchip sunxi_mmc meson_gx_mmc ext4" ;;
armv7) deb=armhf kernel=linux-image-armmp-lpae
	mods="virtio_blk virtio_mmio virtio_pci ahci sd_mod usb_storage mmc_block sdhci_esdhc_imx omap_hsmmc sunxi_mmc dw_mmc_rockchip ext4" ;;
*) echo "base.sh: ARCH=$arch, want amd64, arm64 or armv7" >&2; exit 2 ;;
esac
# Kernel module trees a gateway does not use: graphics, video capture,
# sound, InfiniBand. About 100 MB less in each root slot.
excl=()
for d in drivers/gpu drivers/media sound drivers/infiniband drivers/staging; do
	excl+=("--dpkgopt=path-exclude=/lib/modules/*/kernel/$d/*" "--dpkgopt=path-exclude=/usr/lib/modules/*/kernel/$d/*")
done
# The initramfs only has to mount the root: a short module list keeps it
# small and, on the foreign arches, keeps mkinitramfs under qemu-user from
# taking twenty minutes.
hook="mkdir -p \"\$1/etc/initramfs-tools/conf.d\" \"\$1/usr/share/initramfs-tools/modules.d\";
echo MODULES=list > \"\$1/etc/initramfs-tools/conf.d/gantry\";
printf '%s\n' $mods > \"\$1/usr/share/initramfs-tools/modules.d/gantry.conf\""
mmdebstrap --quiet --variant=essential --architectures="$deb" \
	--include="systemd-sysv,udev,systemd-boot,systemd-resolved,systemd-timesyncd,$kernel,zstd,openssl,e2fsprogs,ca-certificates,kmod,iproute2" \
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
	"${excl[@]}" \
	--essential-hook="$hook" \
	--customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/cache/apt/archives/*.deb' \
	bookworm "$out" http://deb.debian.org/debian
