package topic

import (
	"strings"
	"unicode/utf8"

	"gantry/broker/packet"
)

// MaxLen is the longest topic name or filter in bytes: both travel as an
// MQTT UTF-8 string with a two-byte length prefix.
const MaxLen = 65535

// sharePrefix starts a shared subscription filter: $share/{group}/{filter}.
const sharePrefix = "$share/"

// ValidateName checks a topic name as carried by PUBLISH (or a Will): it
// must be non-empty, at most MaxLen bytes, well-formed UTF-8 without
// U+0000, and free of the wildcards '+' and '#'. It returns
// packet.TopicNameInvalid or nil.
func ValidateName(topic string) error {
	if !wellFormed(topic) || strings.ContainsAny(topic, "+#") {
		return packet.TopicNameInvalid
	}
	return nil
}

// ValidateFilter checks a plain topic filter as carried by SUBSCRIBE or
// UNSUBSCRIBE: non-empty, at most MaxLen bytes, well-formed UTF-8 without
// U+0000, '+' only as a whole level and '#' only as the whole last level.
// It does not interpret $share: a shared filter is also a well-formed plain
// filter, use ParseShared to split and check it. It returns
// packet.TopicFilterInvalid or nil.
func ValidateFilter(filter string) error {
	if !wellFormed(filter) {
		return packet.TopicFilterInvalid
	}
	for i := 0; i < len(filter); i++ {
		c := filter[i]
		if c != '+' && c != '#' {
			continue
		}
		if i > 0 && filter[i-1] != '/' {
			return packet.TopicFilterInvalid // wildcard glued to a prefix
		}
		if c == '#' && i != len(filter)-1 {
			return packet.TopicFilterInvalid // '#' not the whole last level
		}
		if c == '+' && i+1 < len(filter) && filter[i+1] != '/' {
			return packet.TopicFilterInvalid // '+' glued to a suffix
		}
	}
	return nil
}

// ParseShared splits a subscription filter. A filter that does not start
// with "$share/" is returned as inner, with shared false and the result of
// ValidateFilter. A shared filter $share/{group}/{inner} needs a non-empty
// group without '+', '#' or '/', and a valid inner filter; otherwise err is
// packet.TopicFilterInvalid (shared is then true, group and inner empty).
func ParseShared(filter string) (group, inner string, shared bool, err error) {
	group, inner, shared = splitShared(filter)
	if !shared {
		if strings.HasPrefix(filter, sharePrefix) {
			return "", "", true, packet.TopicFilterInvalid
		}
		return "", filter, false, ValidateFilter(filter)
	}
	if !wellFormed(filter) || strings.ContainsAny(group, "+#") || ValidateFilter(inner) != nil {
		return "", "", true, packet.TopicFilterInvalid
	}
	return group, inner, true, nil
}

// splitShared splits $share/{group}/{inner} without validating anything
// but the presence of a non-empty group followed by '/'. Every matcher of
// the package reads shared filters through it, so they agree.
func splitShared(filter string) (group, inner string, ok bool) {
	rest, ok := strings.CutPrefix(filter, sharePrefix)
	if !ok {
		return "", filter, false
	}
	group, inner, ok = strings.Cut(rest, "/")
	if !ok || group == "" {
		return "", filter, false
	}
	return group, inner, true
}

// Matches reports whether the topic name matches the filter, following
// MQTT 5.0 section 4.7: '+' matches exactly one level (possibly empty),
// '#' matches the parent level and any number of levels below it, and a
// filter whose first level is '+' or '#' matches no topic starting with
// '$'. A shared filter $share/{group}/{inner} matches as its inner filter.
// Both arguments are assumed valid (ValidateName, ParseShared); invalid
// input never panics but the answer is then unspecified.
func Matches(filter, topic string) bool {
	if _, inner, ok := splitShared(filter); ok {
		filter = inner
	}
	if dollar(topic) && filter != "" && (filter[0] == '+' || filter[0] == '#') {
		return false
	}
	fi, ti := 0, 0
	for {
		f, fnext, flast := level(filter, fi)
		if f == "#" {
			return true
		}
		t, tnext, tlast := level(topic, ti)
		if f != "+" && f != t {
			return false
		}
		switch {
		case flast && tlast:
			return true
		case tlast:
			return filter[fnext:] == "#" // "sport/#" matches "sport"
		case flast:
			return false
		}
		fi, ti = fnext, tnext
	}
}

// level returns the level of s starting at byte i, the start of the level
// after it, and whether it is the last level. "a/" has the levels "a" and
// "", so the walk is allocation-free and never needs strings.Split.
func level(s string, i int) (lvl string, next int, last bool) {
	j := strings.IndexByte(s[i:], '/')
	if j < 0 {
		return s[i:], len(s), true
	}
	return s[i : i+j], i + j + 1, false
}

// dollar reports whether a topic (or a first level) starts with '$': such
// topics are reserved for the server and hidden from leading wildcards.
func dollar(s string) bool {
	return s != "" && s[0] == '$'
}

// wellFormed checks what names and filters share: 1..MaxLen bytes of
// well-formed UTF-8 (no surrogates) without U+0000.
func wellFormed(s string) bool {
	return s != "" && len(s) <= MaxLen && strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}
