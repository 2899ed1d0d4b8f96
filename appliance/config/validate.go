package config

import (
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Validate checks every field against its range, allowed values and
// format, and the rules across fields (see Markdown). It returns nil or
// an *Error that lists every problem. Derived fields may still be unset
// (as in a Config built by hand); Load fills them in before it validates.
func (c *Config) Validate() error {
	return errorOf(c.problems())
}

func (c *Config) problems() []problem {
	root := reflect.ValueOf(c).Elem()
	var ps []problem
	for _, f := range schema.fields {
		if !f.sameAsSource(root) {
			ps = append(ps, f.check(f.value(root))...)
		}
	}
	for _, r := range rules {
		ps = append(ps, r.check(c)...)
	}
	return ps
}

// sameAsSource reports whether f is derived from another field and holds
// that field's value: any problem with it is reported on the source.
func (f *field) sameAsSource(root reflect.Value) bool {
	ref, sub := f.derivation()
	src := schema.byPath[ref]
	return src != nil && sub == "" && f.value(root).Equal(src.value(root))
}

// check reports v, the value of f, when it breaks f's tags.
func (f *field) check(v reflect.Value) []problem {
	switch f.kind {
	case kindInt:
		return f.checkNumber(float64(v.Int()), strconv.FormatInt(v.Int(), 10))
	case kindUint32:
		return f.checkNumber(float64(v.Uint()), strconv.FormatUint(v.Uint(), 10))
	case kindFloat:
		return f.checkNumber(v.Float(), strconv.FormatFloat(v.Float(), 'g', -1, 64))
	case kindString:
		if want := f.checkString(v.String()); want != "" {
			return []problem{{f.path, strconv.Quote(v.String()), want}}
		}
	case kindStrings:
		return f.checkList(v.Interface().([]string))
	}
	return nil
}

func (f *field) checkNumber(x float64, text string) []problem {
	for _, s := range f.spans {
		if x >= s.lo && x <= s.hi {
			return nil
		}
	}
	return []problem{{f.path, text, f.rng}}
}

// checkString returns what s should be, or "" when it is fine. An empty
// string is fine unless the field is required or lists its values.
func (f *field) checkString(s string) string {
	switch {
	case len(f.values) > 0 && !slices.Contains(f.values, s):
		return orList(f.values)
	case s == "" && f.require:
		return "a value"
	case s == "":
		return ""
	case f.format == "ip" && !isIP(s):
		return "an IP address"
	case f.format == "multicast" && !isMulticast(s):
		return "a multicast IP address"
	}
	return ""
}

func (f *field) checkList(list []string) []problem {
	var ps []problem
	for i, s := range list {
		if f.format == "hostport" && !isHostPort(s) {
			ps = append(ps, problem{f.path + "[" + strconv.Itoa(i) + "]", strconv.Quote(s), "host:port"})
		}
	}
	return ps
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

func isMulticast(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.IsMulticast()
}

// isHostPort reports whether s is host:port with a non-empty host and a
// port in 1..65535.
func isHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

// orList is "a, b or c".
func orList(values []string) string {
	if len(values) == 1 {
		return values[0]
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}
