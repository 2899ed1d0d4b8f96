package defs

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kind is a kind of definition.
type Kind string

// Kinds of definitions. DEFINE ROUTE is an alias of DEFINE CONNECTOR: both
// are Connector.
const (
	Model     Kind = "model"
	Action    Kind = "action"
	Connector Kind = "connector"
	Rule      Kind = "rule"
)

// Kinds returns the kinds in load order (LOT.md §9.4: models, actions,
// routes, rules): a definition may refer to those of earlier kinds.
func Kinds() []Kind { return []Kind{Model, Action, Connector, Rule} }

// rank is the position of k in load order, -1 when k is unknown.
func (k Kind) rank() int {
	switch k {
	case Model:
		return 0
	case Action:
		return 1
	case Connector:
		return 2
	case Rule:
		return 3
	}
	return -1
}

// Valid reports whether k is one of the kinds.
func (k Kind) Valid() bool { return k.rank() >= 0 }

// ParseKind returns the kind named s, ignoring case and a plural s; "route"
// is Connector.
func ParseKind(s string) (Kind, error) {
	k := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), "s")
	if k == "route" {
		return Connector, nil
	}
	if Kind(k).Valid() {
		return Kind(k), nil
	}
	return "", fmt.Errorf("defs: unknown kind %q (want action, model, rule, connector or route)", s)
}

// MaxNameLen is the longest definition name, in bytes.
const MaxNameLen = 128

// ValidateName checks a definition name (LOT.md §1.2): 1 to MaxNameLen
// letters, digits and '_', plus '-' and '.' (which the vendor's linter
// tolerates) after the first character. Names are case-sensitive. The
// name is also a file name, which these rules keep safe.
func ValidateName(kind Kind, name string) error {
	if name == "" {
		return fmt.Errorf("defs: %s name is empty", kind)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("defs: %s name %q is %d bytes, more than %d", kind, name, len(name), MaxNameLen)
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
		case (r == '-' || r == '.') && i > 0:
		default:
			what := fmt.Sprintf("%q", r)
			if r == utf8.RuneError {
				what = "invalid UTF-8"
			}
			return fmt.Errorf("defs: %s name %q has %s at byte %d; use letters, digits and '_' (and '-' or '.' after the first character)",
				kind, name, what, i)
		}
	}
	return nil
}
