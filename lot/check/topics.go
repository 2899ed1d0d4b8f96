package check

import (
	"regexp"
	"strings"
	"time"

	"gantry/broker/topic"
	"gantry/lot/syntax"
)

// constString returns the value of an expression made only of string
// literals joined by '+'.
func constString(e syntax.Expr) (string, bool) {
	switch x := e.(type) {
	case *syntax.StringLit:
		return x.Value, true
	case *syntax.BinaryExpr:
		if x.Op != syntax.OpAdd {
			return "", false
		}
		a, ok1 := constString(x.X)
		b, ok2 := constString(x.Y)
		return a + b, ok1 && ok2
	}
	return "", false
}

// literalParts returns the string literals of a '+' concatenation.
func literalParts(e syntax.Expr) []*syntax.StringLit {
	switch x := e.(type) {
	case *syntax.StringLit:
		return []*syntax.StringLit{x}
	case *syntax.BinaryExpr:
		if x.Op == syntax.OpAdd {
			return append(literalParts(x.X), literalParts(x.Y)...)
		}
	}
	return nil
}

// filterLit checks a topic filter written as a string literal.
func (c *checker) filterLit(s *syntax.StringLit, what string) {
	if s == nil {
		return
	}
	if err := topic.ValidateFilter(s.Value); err != nil {
		c.errorf(s.Start, filterHint(s.Value), "invalid topic filter %q in %s", s.Value, what)
	}
}

// filterExpr checks the topic filter of a trigger: it must be a constant.
func (c *checker) filterExpr(e syntax.Expr, what string) {
	if e == nil {
		return
	}
	v, ok := constString(e)
	if !ok {
		c.errorf(e.Pos(), `write the filter as a string, such as "sensors/+/temp"`,
			"the topic filter of %s must be a constant string", what)
		return
	}
	if err := topic.ValidateFilter(v); err != nil {
		c.errorf(e.Pos(), filterHint(v), "invalid topic filter %q in %s", v, what)
	}
}

// filterHint explains the usual mistakes in a topic filter.
func filterHint(f string) string {
	switch {
	case f == "":
		return "a filter has at least one character"
	case strings.Contains(f, "#") && !strings.HasSuffix(f, "#"):
		return "'#' may only be the last level: \"a/#\""
	case strings.Contains(f, "#") || strings.Contains(f, "+"):
		return "a wildcard must fill a whole level: \"a/+/c\", \"a/#\""
	}
	return "topics are UTF-8 without the NUL character"
}

// nameExpr checks a topic name that an action publishes to or reads: no
// wildcard in any literal part, and a valid name when it is a constant.
func (c *checker) nameExpr(e syntax.Expr, what string) {
	if e == nil {
		return
	}
	if v, ok := constString(e); ok {
		if err := topic.ValidateName(v); err != nil {
			hint := "a topic name has no wildcards; wildcards belong in ON TOPIC filters"
			if v == "" {
				hint = "a topic name has at least one character"
			}
			c.errorf(e.Pos(), hint, "invalid topic name %q in %s", v, what)
		}
		return
	}
	for _, s := range literalParts(e) {
		if strings.ContainsAny(s.Value, "+#") {
			c.errorf(s.Start, "a topic name has no wildcards; build it with {variables} or TOPIC POSITION n",
				"wildcard in the topic %q of %s", s.Value, what)
		}
	}
}

// regex checks a constant regular expression.
func (c *checker) regex(e syntax.Expr, what string) {
	s, ok := e.(*syntax.StringLit)
	if !ok {
		return
	}
	if _, err := regexp.Compile(s.Value); err != nil {
		c.errorf(s.Start, "the syntax is RE2 (Go regexp): "+err.Error(), "invalid regular expression %q in %s", s.Value, what)
	}
}

// minInterval is the shortest period a timer or a poll may have.
const minInterval = 10 * time.Millisecond // the scheduler's shortest (lot/schedule MinInterval)

// interval checks n units as a period.
func (c *checker) interval(pos syntax.Pos, n float64, text string, u syntax.TimeUnit, what string) {
	if !(n > 0) {
		c.errorf(pos, "use a positive number: ON EVERY 10 SECONDS", "invalid interval %s %s in %s: it must be more than 0", text, u, what)
		return
	}
	d, fixed := u.Duration(n)
	if !fixed {
		if u == syntax.UnitMonth || u == syntax.UnitYear {
			if n != float64(int64(n)) || n > 1000 {
				c.errorf(pos, "use a whole number of months or years", "invalid interval %s %s in %s", text, u, what)
			}
			return
		}
		c.errorf(pos, "", "interval %s %s in %s is too long", text, u, what)
		return
	}
	if d < minInterval {
		c.errorf(pos, "the shortest interval is 10 MILLISECONDS", "invalid interval %s %s in %s: shorter than the shortest timer, 10 milliseconds", text, u, what)
	}
}

// clock checks "HH:mm" or "HH:mm:ss".
func (c *checker) clock(pos syntax.Pos, s, what string) {
	for _, layout := range []string{"15:04", "15:04:05"} {
		if _, err := time.Parse(layout, s); err == nil {
			return
		}
	}
	c.errorf(pos, `write the time as "HH:mm" or "HH:mm:ss", such as "07:30"`, "invalid time %q in %s", s, what)
}

// moment checks the argument of ON TIMESTAMP: "HH:mm:ss" daily or
// "dd-MM-yyyy HH:mm:ss" once.
func (c *checker) moment(pos syntax.Pos, s string) {
	for _, layout := range []string{"15:04:05", "15:04", "02-01-2006 15:04:05"} {
		if _, err := time.Parse(layout, s); err == nil {
			return
		}
	}
	c.errorf(pos, `write "HH:mm:ss" for every day or "dd-MM-yyyy HH:mm:ss" for once`, "invalid moment %q in ON TIMESTAMP", s)
}
