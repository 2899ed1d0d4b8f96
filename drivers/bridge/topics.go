package bridge

import (
	"fmt"
	"strings"
)

// Pattern is a topic filter whose wildcards map positionally onto those
// of another (LOT.md §7.3): room/+/temp → site1/room/+/temp.
type Pattern struct {
	levels []string
	wild   int // number of + levels, plus one for a final #
}

// ParsePattern reads a filter.
func ParsePattern(f string) (Pattern, error) {
	p := Pattern{levels: strings.Split(f, "/")}
	for i, l := range p.levels {
		switch {
		case l == "+":
			p.wild++
		case l == "#":
			if i != len(p.levels)-1 {
				return Pattern{}, fmt.Errorf("topic %q: # must be the last level", f)
			}
			p.wild++
		case strings.ContainsAny(l, "+#"):
			return Pattern{}, fmt.Errorf("topic %q: a wildcard must be a whole level", f)
		}
	}
	return p, nil
}

// String is the filter.
func (p Pattern) String() string { return strings.Join(p.levels, "/") }

// hasHash reports whether the filter ends in #.
func (p Pattern) hasHash() bool { return len(p.levels) > 0 && p.levels[len(p.levels)-1] == "#" }

// Compatible reports whether to can receive what p matches: the same
// wildcards in the same order.
func (p Pattern) Compatible(to Pattern) bool {
	if p.wild != to.wild || p.hasHash() != to.hasHash() {
		return false
	}
	return true
}

// Map turns a topic p matches into the topic of to, the wildcards' levels
// carried over in order. ok is false when p does not match topic.
func (p Pattern) Map(topic string, to Pattern) (string, bool) {
	parts := strings.Split(topic, "/")
	var caught []string
	for i, l := range p.levels {
		switch {
		case l == "#":
			if i > len(parts) {
				return "", false
			}
			caught = append(caught, strings.Join(parts[i:], "/"))
			return fill(to, caught), true
		case i >= len(parts):
			return "", false
		case l == "+":
			caught = append(caught, parts[i])
		case l != parts[i]:
			return "", false
		}
	}
	if len(parts) != len(p.levels) {
		return "", false
	}
	return fill(to, caught), true
}

func fill(to Pattern, caught []string) string {
	out := make([]string, 0, len(to.levels))
	k := 0
	for _, l := range to.levels {
		if (l == "+" || l == "#") && k < len(caught) {
			if l == "#" && caught[k] == "" {
				k++
				continue // a/# matched "a": nothing to carry
			}
			out = append(out, caught[k])
			k++
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "/")
}
