package boot

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Partition is one GPT partition of a disk image, in bytes.
type Partition struct {
	Name   string
	Offset int64
	Size   int64
}

// Partitions reads the GPT of a disk image with sfdisk.
func Partitions(img string) (map[string]Partition, error) {
	out, err := exec.Command("sfdisk", "-J", img).Output()
	if err != nil {
		return nil, fmt.Errorf("sfdisk -J %s: %w", img, err)
	}
	var pt struct {
		PartitionTable struct {
			SectorSize int64 `json:"sectorsize"`
			Partitions []struct {
				Start, Size int64
				Name        string
			}
		} `json:"partitiontable"`
	}
	if err := json.Unmarshal(out, &pt); err != nil {
		return nil, fmt.Errorf("sfdisk -J %s: %w", img, err)
	}
	ss := pt.PartitionTable.SectorSize
	if ss == 0 {
		ss = 512
	}
	parts := map[string]Partition{}
	for _, p := range pt.PartitionTable.Partitions {
		parts[p.Name] = Partition{Name: p.Name, Offset: p.Start * ss, Size: p.Size * ss}
	}
	return parts, nil
}

// WriteAt copies the file from into img at offset, without truncating img.
func WriteAt(img string, offset int64, from string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, offset); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Debugfs runs debugfs -w commands on an ext4 image file (no mount) and
// fails when debugfs reports an error for any of them.
func Debugfs(img string, cmds ...string) error {
	f, err := os.CreateTemp("", "debugfs-*.cmd")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	f.WriteString(strings.Join(cmds, "\n") + "\n")
	f.Close()
	out, err := exec.Command("debugfs", "-w", "-f", f.Name(), img).CombinedOutput()
	if err != nil {
		return fmt.Errorf("debugfs: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "File not found") || strings.Contains(l, "rror") || strings.Contains(l, "Could not") {
			return fmt.Errorf("debugfs on %s: %s\n%s", img, l, out)
		}
	}
	return nil
}

// ESPEntries lists the boot loader entries on the ESP of a disk image.
func ESPEntries(img string, esp Partition) ([]string, error) {
	out, err := exec.Command("mdir", "-b", "-i", fmt.Sprintf("%s@@%d", img, esp.Offset), "::/loader/entries").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("mdir: %v: %s", err, out)
	}
	var names []string
	for _, l := range strings.Fields(string(out)) {
		names = append(names, strings.TrimPrefix(l, "::/loader/entries/"))
	}
	return names, nil
}

// Run runs a command and returns its combined output, the error naming
// the command.
func Run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
