package topic

import (
	"errors"
	"strings"
	"testing"

	"gantry/broker/packet"
)

func TestValidateName(t *testing.T) {
	cases := []struct {
		name  string
		topic string
		ok    bool
	}{
		{"simple", "sport/tennis/player1", true},
		{"single level", "sport", true},
		{"leading slash", "/finance", true},
		{"trailing slash", "sport/", true},
		{"empty level", "a//b", true},
		{"only slash", "/", true},
		{"space", "Accounts payable", true},
		{"dollar", "$SYS/monitor/Clients", true},
		{"unicode", "température/salle/°C", true},
		{"max length", strings.Repeat("a", MaxLen), true},
		{"empty", "", false},
		{"plus", "sport/+/player1", false},
		{"hash", "sport/#", false},
		{"plus glued", "sport+", false},
		{"hash glued", "sport#", false},
		{"nul", "a\x00b", false},
		{"invalid utf8", "a\xffb", false},
		{"surrogate", "a\xed\xa0\x80b", false},
		{"too long", strings.Repeat("a", MaxLen+1), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateName(tc.topic)
			if tc.ok && err != nil {
				t.Fatalf("ValidateName(%q) = %v, want nil", tc.topic, err)
			}
			if !tc.ok && !errors.Is(err, packet.TopicNameInvalid) {
				t.Fatalf("ValidateName(%q) = %v, want TopicNameInvalid", tc.topic, err)
			}
		})
	}
}

func TestValidateFilter(t *testing.T) {
	cases := []struct {
		name   string
		filter string
		ok     bool
	}{
		{"hash alone", "#", true},
		{"plus alone", "+", true},
		{"multi level", "sport/tennis/player1/#", true},
		{"sport hash", "sport/#", true},
		{"plus last", "sport/tennis/+", true},
		{"plus middle", "sport/+/player1", true},
		{"plus first then hash", "+/tennis/#", true},
		{"plus plus", "+/+", true},
		{"leading slash plus", "/+", true},
		{"empty levels", "a//b", true},
		{"trailing slash", "sport/", true},
		{"plus empty level", "a/+/", true},
		{"dollar", "$SYS/#", true},
		{"share is plain here", "$share/g/a", true},
		{"empty", "", false},
		{"hash glued", "sport/tennis#", false},
		{"hash not last", "sport/tennis/#/ranking", false},
		{"hash prefix", "#a", false},
		{"double hash", "##", false},
		{"plus glued before", "sport+", false},
		{"plus glued after", "+sport", false},
		{"plus inside", "sp+ort/x", false},
		{"plus plus glued", "++", false},
		{"nul", "a/\x00", false},
		{"invalid utf8", "\xc3", false},
		{"too long", strings.Repeat("a", MaxLen+1), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateFilter(tc.filter)
			if tc.ok && err != nil {
				t.Fatalf("ValidateFilter(%q) = %v, want nil", tc.filter, err)
			}
			if !tc.ok && !errors.Is(err, packet.TopicFilterInvalid) {
				t.Fatalf("ValidateFilter(%q) = %v, want TopicFilterInvalid", tc.filter, err)
			}
		})
	}
}

func TestParseShared(t *testing.T) {
	cases := []struct {
		name   string
		filter string
		group  string
		inner  string
		shared bool
		ok     bool
	}{
		{"plain", "sport/#", "", "sport/#", false, true},
		{"plain invalid", "sport/#/x", "", "", false, false},
		{"shared", "$share/g1/sport/#", "g1", "sport/#", true, true},
		{"shared plus", "$share/consumers/+/temp", "consumers", "+/temp", true, true},
		{"shared hash", "$share/g/#", "g", "#", true, true},
		{"shared dollar inner", "$share/g/$SYS/x", "g", "$SYS/x", true, true},
		{"shared empty levels", "$share/g//", "g", "/", true, true},
		{"share word alone", "$share", "", "$share", false, true},
		{"share like prefix", "$shared/g/a", "", "$shared/g/a", false, true},
		{"no inner", "$share/g", "", "", true, false},
		{"empty inner", "$share/g/", "", "", true, false},
		{"empty group", "$share//a", "", "", true, false},
		{"nothing after prefix", "$share/", "", "", true, false},
		{"group plus", "$share/g+/a", "", "", true, false},
		{"group hash", "$share/#/a", "", "", true, false},
		{"invalid inner", "$share/g/a#", "", "", true, false},
		{"invalid utf8 group", "$share/\xff/a", "", "", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, inner, shared, err := ParseShared(tc.filter)
			if !tc.ok {
				if !errors.Is(err, packet.TopicFilterInvalid) || shared != tc.shared {
					t.Fatalf("ParseShared(%q) = shared %v err %v, want shared %v TopicFilterInvalid",
						tc.filter, shared, err, tc.shared)
				}
				return
			}
			if err != nil || g != tc.group || inner != tc.inner || shared != tc.shared {
				t.Fatalf("ParseShared(%q) = %q %q %v %v, want %q %q %v nil",
					tc.filter, g, inner, shared, err, tc.group, tc.inner, tc.shared)
			}
		})
	}
}

// matchCases are the examples of MQTT 5.0 section 4.7 and the edge cases
// around them; the Tree and Index tests replay them too.
var matchCases = []struct {
	name   string
	filter string
	topic  string
	want   bool
}{
	{"hash parent level", "sport/tennis/player1/#", "sport/tennis/player1", true},
	{"hash one below", "sport/tennis/player1/#", "sport/tennis/player1/ranking", true},
	{"hash two below", "sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", true},
	{"hash sibling", "sport/tennis/player1/#", "sport/tennis/player2", false},
	{"sport hash matches sport", "sport/#", "sport", true},
	{"sport hash matches trailing slash", "sport/#", "sport/", true},
	{"sport hash other root", "sport/#", "sports", false},
	{"hash everything", "#", "sport/tennis/player1", true},
	{"hash leading slash", "#", "/finance", true},
	{"plus one level", "sport/tennis/+", "sport/tennis/player1", true},
	{"plus other value", "sport/tennis/+", "sport/tennis/player2", true},
	{"plus not two levels", "sport/tennis/+", "sport/tennis/player1/ranking", false},
	{"plus not parent", "sport/+", "sport", false},
	{"plus empty level", "sport/+", "sport/", true},
	{"plus plus leading slash", "+/+", "/finance", true},
	{"slash plus", "/+", "/finance", true},
	{"plus not two", "+", "/finance", false},
	{"plus single", "+", "finance", true},
	{"plus middle", "sport/+/player1", "sport/tennis/player1", true},
	{"plus middle empty", "a/+/b", "a//b", true},
	{"plus then hash", "+/tennis/#", "sport/tennis/player1", true},
	{"empty level exact", "a//b", "a//b", true},
	{"empty level vs one", "a//b", "a/b", false},
	{"trailing slash exact", "sport/", "sport/", true},
	{"trailing slash vs none", "sport/", "sport", false},
	{"none vs trailing slash", "sport", "sport/", false},
	{"leading slash distinct", "/finance", "finance", false},
	{"case sensitive", "ACCOUNTS", "Accounts", false},
	{"spaces", "Accounts payable", "Accounts payable", true},
	{"longer topic", "a/b", "a/b/c", false},
	{"longer filter", "a/b/c", "a/b", false},
	{"dollar hidden from hash", "#", "$SYS/monitor/Clients", false},
	{"dollar hidden from plus", "+/monitor/Clients", "$SYS/monitor/Clients", false},
	{"dollar plus alone", "+", "$SYS", false},
	{"dollar explicit hash", "$SYS/#", "$SYS/monitor/Clients", true},
	{"dollar explicit parent", "$SYS/#", "$SYS", true},
	{"dollar explicit plus", "$SYS/monitor/+", "$SYS/monitor/Clients", true},
	{"dollar not first", "a/#", "a/$b", true},
	{"dollar plus not first", "a/+", "a/$b", true},
	{"shared hash", "$share/g/sport/#", "sport/tennis", true},
	{"shared plus", "$share/g/+/tennis", "sport/tennis", true},
	{"shared miss", "$share/g/sport/+", "sport", false},
	{"shared dollar rule", "$share/g/#", "$SYS/x", false},
}

func TestMatches(t *testing.T) {
	for _, tc := range matchCases {
		t.Run(tc.name, func(t *testing.T) {
			if err := ValidateName(tc.topic); err != nil {
				t.Fatalf("bad case: topic %q: %v", tc.topic, err)
			}
			if _, _, _, err := ParseShared(tc.filter); err != nil {
				t.Fatalf("bad case: filter %q: %v", tc.filter, err)
			}
			if got := Matches(tc.filter, tc.topic); got != tc.want {
				t.Fatalf("Matches(%q, %q) = %v, want %v", tc.filter, tc.topic, got, tc.want)
			}
		})
	}
}

func TestMatchesInvalidDoesNotPanic(t *testing.T) {
	for _, f := range []string{"", "#/a", "a/#/b", "++", "$share/", "$share/g", "/"} {
		for _, topic := range []string{"", "/", "a", "a/b", "$x", "#", "+"} {
			_ = Matches(f, topic)
		}
	}
}

func TestLevel(t *testing.T) {
	cases := []struct {
		name string
		s    string
		want []string
	}{
		{"one", "a", []string{"a"}},
		{"two", "a/b", []string{"a", "b"}},
		{"trailing", "a/", []string{"a", ""}},
		{"leading", "/a", []string{"", "a"}},
		{"slash", "/", []string{"", ""}},
		{"empty middle", "a//b", []string{"a", "", "b"}},
		{"empty", "", []string{""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for i, last := 0, false; !last; {
				var lvl string
				lvl, i, last = level(tc.s, i)
				got = append(got, lvl)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Fatalf("levels of %q = %q, want %q", tc.s, got, tc.want)
			}
		})
	}
}
