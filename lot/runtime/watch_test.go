package runtime

import (
	"slices"
	"testing"

	"gantry/lot/defs"
)

// TestWatchFilters: the trigger client subscribes to what deployed LoT
// reacts to or reads, to every topic only for a GET TOPIC of a computed
// topic, and to nothing without LoT.
func TestWatchFilters(t *testing.T) {
	action := func(name, src string) defs.Definition {
		return defs.Definition{Kind: defs.Action, Name: name, Source: src}
	}
	tests := []struct {
		name string
		defs []defs.Definition
		want []string
	}{
		{"nothing deployed", nil, nil},
		{"trigger and literal GET TOPIC", []defs.Definition{action("A",
			"DEFINE ACTION A ON TOPIC \"in/+\" DO PUBLISH TOPIC \"out\" WITH GET TOPIC \"cfg/limit\"")},
			[]string{"cfg/limit", "in/+"}},
		{"timer reading a $SYS topic", []defs.Definition{action("T",
			"DEFINE ACTION T ON EVERY 5 SECONDS DO PUBLISH TOPIC \"out\" WITH GET TOPIC \"$SYS/broker/uptime\"")},
			[]string{"$SYS/broker/uptime"}},
		{"computed GET TOPIC watches everything", []defs.Definition{action("C",
			"DEFINE ACTION C ON TOPIC \"in/+\" DO PUBLISH TOPIC \"out\" WITH GET TOPIC (\"cfg/\" + TOPIC POSITION 2)")},
			[]string{"#"}},
		{"model sources and triggers", []defs.Definition{{Kind: defs.Model, Name: "M", Source: "DEFINE MODEL M WITH TOPIC \"m/out\"\n" +
			"    ADD \"a\" WITH TOPIC \"m/a\" AS TRIGGER\n    ADD \"b\" WITH TOPIC \"m/b\"\n"}},
			[]string{"m/a", "m/b", "m/out"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, fails := compile(tt.defs, nil)
			if len(fails) > 0 {
				t.Fatalf("compile: %v", fails[0].err)
			}
			if got := watchFilters(d); !slices.Equal(got, tt.want) {
				t.Errorf("watchFilters = %q, want %q", got, tt.want)
			}
		})
	}
}
