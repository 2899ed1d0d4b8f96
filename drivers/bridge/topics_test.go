package bridge

import "testing"

func TestPatternMap(t *testing.T) {
	for _, tt := range []struct{ from, to, topic, want string }{
		{"room/+/temp", "site1/room/+/temp", "room/k/temp", "site1/room/k/temp"},
		{"devices/+/temperature", "bridge/devices/+/temp", "devices/d7/temperature", "bridge/devices/d7/temp"},
		{"a/#", "b/#", "a/x/y/z", "b/x/y/z"},
		{"a/+/#", "z/+/q/#", "a/1/2/3", "z/1/q/2/3"},
		{"plain", "other", "plain", "other"},
		{"a/#", "b/#", "a", "b"},
	} {
		from, _ := ParsePattern(tt.from)
		to, _ := ParsePattern(tt.to)
		if !from.Compatible(to) {
			t.Errorf("%s and %s not compatible", tt.from, tt.to)
		}
		if got, ok := from.Map(tt.topic, to); !ok || got != tt.want {
			t.Errorf("%s → %s: %s became %q, %v; want %q", tt.from, tt.to, tt.topic, got, ok, tt.want)
		}
	}
	from, _ := ParsePattern("room/+/temp")
	to, _ := ParsePattern("x/+")
	for _, tp := range []string{"room/temp", "room/a/b/temp", "hall/a/temp"} {
		if got, ok := from.Map(tp, to); ok {
			t.Errorf("%s mapped to %s", tp, got)
		}
	}
	if a, _ := ParsePattern("a/+"); a.Compatible(to) == false {
		t.Error("a/+ and x/+ should be compatible")
	}
	if a, _ := ParsePattern("a/#"); a.Compatible(to) {
		t.Error("a/# and x/+ compatible")
	}
}
