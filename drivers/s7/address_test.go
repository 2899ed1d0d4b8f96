package s7

import "testing"

func TestParseAddress(t *testing.T) {
	for in, want := range map[string]Address{
		"DB1.DBD0":   {Area: DB, DB: 1, Byte: 0, Size: 'D'},
		"db2.dbx8.3": {Area: DB, DB: 2, Byte: 8, Bit: 3, Size: 'X', HasBit: true},
		"DB10.DBW20": {Area: DB, DB: 10, Byte: 20, Size: 'W'},
		"MW10":       {Area: Merker, Byte: 10, Size: 'W'},
		"M0.1":       {Area: Merker, Byte: 0, Bit: 1, Size: 'X', HasBit: true},
		"I0.3":       {Area: Input, Byte: 0, Bit: 3, Size: 'X', HasBit: true},
		"EB4":        {Area: Input, Byte: 4, Size: 'B'},
		"QD8":        {Area: Output, Byte: 8, Size: 'D'},
		"AW2":        {Area: Output, Byte: 2, Size: 'W'},
	} {
		got, err := ParseAddress(in)
		if err != nil || got != want {
			t.Errorf("ParseAddress(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "DB1", "DB0.DBW0", "DB1.DBZ0", "DB1.DBX8", "DB1.DBX8.9", "MW-1", "X1", "DB1.W0", "MW70000"} {
		if _, err := ParseAddress(bad); err == nil {
			t.Errorf("ParseAddress(%q) accepted", bad)
		}
	}
}

func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"DB1.DBD0", "DB1.DBX8.0", "MW10", "I0.1", "QB2", "DB65535.DBW65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			return
		}
		b, err := ParseAddress(a.String())
		if err != nil || b != a {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, a, a.String(), b, err)
		}
	})
}
