package rules

import "strings"

// This file compares a rule's TO TOPIC filter with the topic of a request.
// A publish carries a topic name, matched with topic.Matches. A subscribe
// carries a filter, which stands for every topic it can match, so two
// questions arise (both answered level by level, never splitting strings):
//
//   - covers(rule, sub): every topic sub can match, rule matches too. An
//     ALLOW applies to a subscription only then, so "x/#" allowed does not
//     let "#" through.
//   - intersects(rule, sub): some topic matches both. A DENY applies to a
//     subscription as soon as they overlap, so "x/#" denied refuses "#".
//
// Both follow MQTT's '$' rule: a filter whose first level is a wildcard
// matches no topic starting with '$'.

// nextLevel returns the level of s starting at byte i, the start of the
// following level and whether this is the last level.
func nextLevel(s string, i int) (lvl string, next int, last bool) {
	j := strings.IndexByte(s[i:], '/')
	if j < 0 {
		return s[i:], len(s), true
	}
	return s[i : i+j], i + j + 1, false
}

func wildcard(level string) bool { return level == "+" || level == "#" }

// dollarClash reports whether one filter starts with a wildcard and the
// other with a literal level beginning with '$': they share no topic.
func dollarClash(a, b string) bool {
	fa, _, _ := nextLevel(a, 0)
	fb, _, _ := nextLevel(b, 0)
	return (wildcard(fa) && strings.HasPrefix(fb, "$")) || (wildcard(fb) && strings.HasPrefix(fa, "$"))
}

// covers reports whether every topic matched by sub is matched by rule.
// Both are valid filters.
func covers(rule, sub string) bool {
	if dollarClash(rule, sub) {
		return false
	}
	ri, si := 0, 0
	for {
		r, rnext, rlast := nextLevel(rule, ri)
		if r == "#" {
			return true
		}
		s, snext, slast := nextLevel(sub, si)
		switch {
		case s == "#":
			// sub reaches any depth here. Only "#" (handled above) follows,
			// or "+/#" at the top, where there is no parent level to match.
			return ri == 0 && rule == "+/#"
		case s == "+" && r != "+":
			return false
		case s != "+" && r != "+" && r != s:
			return false
		}
		switch {
		case rlast && slast:
			return true
		case slast:
			return rule[rnext:] == "#" // "a/#" covers "a"
		case rlast:
			return false
		}
		ri, si = rnext, snext
	}
}

// intersects reports whether some topic is matched by both filters.
func intersects(a, b string) bool {
	if dollarClash(a, b) {
		return false
	}
	ai, bi := 0, 0
	for {
		x, xnext, xlast := nextLevel(a, ai)
		y, ynext, ylast := nextLevel(b, bi)
		if x == "#" || y == "#" {
			return true
		}
		if x != "+" && y != "+" && x != y {
			return false
		}
		switch {
		case xlast && ylast:
			return true
		case xlast:
			return b[ynext:] == "#"
		case ylast:
			return a[xnext:] == "#"
		}
		ai, bi = xnext, ynext
	}
}

// levelAt returns the n-th level (1-based) of a topic or filter.
func levelAt(s string, n int) (string, bool) {
	if n < 1 {
		return "", false
	}
	i := 0
	for k := 1; ; k++ {
		lvl, next, last := nextLevel(s, i)
		if k == n {
			return lvl, true
		}
		if last {
			return "", false
		}
		i = next
	}
}
