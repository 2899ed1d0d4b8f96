package boot

import "fmt"

// Arch describes one shipped architecture: how Go builds for it, which
// Debian kernel boots it, and how QEMU emulates it.
type Arch struct {
	Name      string // gantry's name: amd64, arm64, armv7
	GOARCH    string
	GOARM     string
	DebArch   string // Debian's name: amd64, arm64, armhf
	KernelPkg string // kernel for the tiny boot (small cloud flavour where there is one)
	QemuUser  string // qemu-user binary that runs the Linux binary on the host
	QemuSys   string // qemu-system binary
	Machine   []string
	Console   string // kernel console device
	NetDevice string // virtio network device model
	// UEFI firmware for the image boot: code (read-only) and the variable
	// store template, copied per VM.
	FirmwareCode, FirmwareVars string
}

// Arches are the shipped architectures, in the order tests run them.
var Arches = []Arch{
	{
		Name: "amd64", GOARCH: "amd64", DebArch: "amd64",
		KernelPkg: "linux-image-cloud-amd64",
		QemuUser:  "", // native
		QemuSys:   "qemu-system-x86_64",
		Machine:   []string{"-M", "q35,accel=tcg", "-cpu", "max"},
		Console:   "ttyS0", NetDevice: "virtio-net-pci",
		FirmwareCode: "/usr/share/OVMF/OVMF_CODE_4M.fd", FirmwareVars: "/usr/share/OVMF/OVMF_VARS_4M.fd",
	},
	{
		Name: "arm64", GOARCH: "arm64", DebArch: "arm64",
		KernelPkg: "linux-image-cloud-arm64",
		QemuUser:  "qemu-aarch64-static",
		QemuSys:   "qemu-system-aarch64",
		// pauth-impdef makes pointer authentication cheap to emulate.
		Machine: []string{"-M", "virt,accel=tcg", "-cpu", "max,pauth-impdef=on"},
		Console: "ttyAMA0", NetDevice: "virtio-net-device",
		FirmwareCode: "/usr/share/AAVMF/AAVMF_CODE.fd", FirmwareVars: "/usr/share/AAVMF/AAVMF_VARS.fd",
	},
	{
		Name: "armv7", GOARCH: "arm", GOARM: "7", DebArch: "armhf",
		KernelPkg: "linux-image-armmp-lpae",
		QemuUser:  "qemu-arm-static",
		QemuSys:   "qemu-system-arm",
		Machine:   []string{"-M", "virt,accel=tcg,highmem=off", "-cpu", "cortex-a15"},
		Console:   "ttyAMA0", NetDevice: "virtio-net-device",
		FirmwareCode: "/usr/share/AAVMF/AAVMF32_CODE.fd", FirmwareVars: "/usr/share/AAVMF/AAVMF32_VARS.fd",
	},
}

// ArchByName returns the architecture called name.
func ArchByName(name string) (Arch, error) {
	for _, a := range Arches {
		if a.Name == name {
			return a, nil
		}
	}
	return Arch{}, fmt.Errorf("boot: ARCH=%q, want amd64, arm64 or armv7", name)
}
