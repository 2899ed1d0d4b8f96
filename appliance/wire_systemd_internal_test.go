package appliance

import "testing"

func TestSlotFromCmdline(t *testing.T) {
	for _, c := range []struct{ name, cmdline, want string }{
		{"slot a", "root=PARTUUID=x rw gantry.slot=a console=ttyS0", "a"},
		{"slot b last", "quiet gantry.slot=b\n", "b"},
		{"none", "root=/dev/vda rw", ""},
		{"empty", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := slotFromCmdline(c.cmdline); got != c.want {
				t.Fatalf("slotFromCmdline(%q) = %q, want %q", c.cmdline, got, c.want)
			}
		})
	}
}
