package check

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gantry/lot/syntax"
)

// Severity says whether a diagnostic stops a deploy.
type Severity int

// Error diagnostics refuse the source; warnings are reported only.
const (
	Error Severity = iota
	Warning
)

// String returns "error" or "warning".
func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// Diagnostic is one finding about a source: where, how bad, what, and a
// likely fix. Line is the source line that holds Pos.
type Diagnostic struct {
	File     string
	Pos      syntax.Pos
	Severity Severity
	Msg      string
	Hint     string
	Line     string
}

// Error returns "file:line:col: severity: msg; hint" on one line.
func (d Diagnostic) Error() string { return d.asSyntax().Error() }

// Format returns the diagnostic on several lines: the message, the source
// line with a caret under the column, and the hint.
func (d Diagnostic) Format() string { return d.asSyntax().Format() }

func (d Diagnostic) asSyntax() *syntax.Error {
	return &syntax.Error{File: d.File, Pos: d.Pos, Msg: d.Severity.String() + ": " + d.Msg,
		Hint: d.Hint, Line: d.Line}
}

// HasErrors reports whether any diagnostic is an Error.
func HasErrors(diags []Diagnostic) bool {
	return slices.ContainsFunc(diags, func(d Diagnostic) bool { return d.Severity == Error })
}

// Format returns every diagnostic in its multi-line form.
func Format(diags []Diagnostic) string {
	var b strings.Builder
	for _, d := range diags {
		b.WriteString(d.Format())
	}
	return b.String()
}

// Source parses src and checks it: the one call a runtime needs. Syntax
// errors come back as Error diagnostics; the File is nil only when nothing
// could be parsed at all.
func Source(name, src string, env Env) (*syntax.File, []Diagnostic) {
	f, err := syntax.Parse(name, src)
	var list syntax.ErrorList
	if errors.As(err, &list) {
		diags := make([]Diagnostic, len(list))
		for i, e := range list {
			diags[i] = Diagnostic{File: e.File, Pos: e.Pos, Severity: Error, Msg: e.Msg, Hint: e.Hint, Line: e.Line}
		}
		return f, diags
	}
	return f, Check(f, env)
}

// Check checks a parsed file against what is deployed (env, which may be
// nil) and returns its diagnostics in source order. Definitions of the
// file are visible to each other whatever their order, and replace
// deployed definitions of the same name.
func Check(f *syntax.File, env Env) []Diagnostic {
	if env == nil {
		env = Deployed{}
	}
	c := &checker{file: f, env: env, actions: map[string]*syntax.Action{}, models: map[string]*syntax.Model{}}
	c.collect()
	for _, d := range f.Defs {
		switch d := d.(type) {
		case *syntax.Action:
			c.action(d)
		case *syntax.Model:
			c.model(d)
		case *syntax.Rule:
			c.rule(d)
		case *syntax.Connector:
			c.connector(d)
		case *syntax.UnsupportedDef:
			c.unsupportedDef(d)
		}
	}
	slices.SortStableFunc(c.diags, func(a, b Diagnostic) int { return cmp.Compare(a.Pos.Offset, b.Pos.Offset) })
	return c.diags
}

// checker holds the state of one Check call.
type checker struct {
	file    *syntax.File
	env     Env
	diags   []Diagnostic
	actions map[string]*syntax.Action // actions of the file by name
	models  map[string]*syntax.Model  // models of the file by name
}

func (c *checker) report(sev Severity, pos syntax.Pos, hint, format string, args ...any) {
	e := syntax.NewError(c.file.Name, c.file.Src, pos, hint, format, args...)
	c.diags = append(c.diags, Diagnostic{File: e.File, Pos: pos, Severity: sev, Msg: e.Msg, Hint: hint, Line: e.Line})
}

func (c *checker) errorf(pos syntax.Pos, hint, format string, args ...any) {
	c.report(Error, pos, hint, format, args...)
}

func (c *checker) warnf(pos syntax.Pos, hint, format string, args ...any) {
	c.report(Warning, pos, hint, format, args...)
}

// collect indexes the file's actions and models and warns about a name
// defined twice.
func (c *checker) collect() {
	seen := map[string]syntax.Pos{}
	for _, d := range c.file.Defs {
		h := d.Header()
		key := h.Kind.String() + " " + h.Name
		if p, ok := seen[key]; ok {
			c.warnf(h.NamePos, "rename one of them", "%s %s is defined again (first at line %d); the later definition replaces the earlier",
				strings.ToLower(h.Kind.String()), h.Name, p.Line)
		}
		seen[key] = h.NamePos
		switch d := d.(type) {
		case *syntax.Action:
			c.actions[d.Name] = d
		case *syntax.Model:
			c.models[d.Name] = d
		}
	}
}

var unsupportedHints = map[syntax.DefKind]string{
	syntax.KindPanel: "dashboards are not part of Gantry; the web console shows topics and health",
	syntax.KindTheme: "dashboards are not part of Gantry",
	syntax.KindThing: "DEFINE THING is a notebook construct and cannot be deployed",
	syntax.KindAgent: "AI agents and routes are not supported",
}

func (c *checker) unsupportedDef(d *syntax.UnsupportedDef) {
	c.errorf(d.Start, unsupportedHints[d.Kind], "DEFINE %s is not supported by Gantry", d.Keyword)
}

// suggestName returns "did you mean X?" for the closest of names, or "".
func suggestName(word string, names []string) string {
	for _, n := range names {
		if strings.EqualFold(n, word) {
			return fmt.Sprintf("did you mean %s?", n)
		}
	}
	if w := syntax.Closest(word, names); w != "" {
		return fmt.Sprintf("did you mean %s?", w)
	}
	return ""
}
