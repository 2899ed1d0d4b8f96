package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
)

// Struct tags read on every leaf field of Config:
//
//	json     the key in the file; always the Go field name
//	env      the environment variable
//	default  the default, in the environment-variable syntax
//	derive   instead of a default: "hostname", another field's path
//	         ("Cluster.Port"), or a path and a sub-directory ("DataDir/cluster");
//	         the zero value is replaced by it when the configuration is loaded
//	range    numeric bounds, "lo..hi", alternatives separated by "|"
//	values   the allowed strings, separated by "|"
//	format   what a string holds: ip, multicast, hostport, path
//	required "true" when a string must not be empty
//	group    starts a group of fields within a section (documentation only)
//	doc      the description
//
// A section field of Config (a struct) carries json and doc only.

// field is one leaf setting, read from the tags.
type field struct {
	path    string // "Mqtt.Port"; a top-level field has no dot
	name    string // "Port"
	index   []int  // reflect index from Config
	kind    kind
	env     string
	def     string
	hasDef  bool
	derive  string
	spans   []span
	rng     string // the range as written in messages: "0 or 15..3600"
	values  []string
	format  string
	require bool
	group   string
	doc     string
}

// span is one closed interval of a range.
type span struct{ lo, hi float64 }

// section is a JSON object of the file: the top level ("") or a struct field.
type section struct {
	name   string
	doc    string
	fields []*field
}

// schemaT is everything the tags say, built once from Config's type.
type schemaT struct {
	sections []*section          // the top level first, then struct order
	fields   []*field            // every leaf, in struct order
	byPath   map[string]*field   // leaves by path
	keys     map[string][]string // section name ("" = top) to its keys, in order
}

var schema = buildSchema()

func buildSchema() *schemaT {
	s := &schemaT{byPath: map[string]*field{}, keys: map[string][]string{}}
	top := &section{}
	s.sections = append(s.sections, top)
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		s.keys[""] = append(s.keys[""], sf.Name)
		if sf.Type.Kind() != reflect.Struct {
			s.addField(top, sf, []int{i})
			continue
		}
		sec := &section{name: sf.Name, doc: sf.Tag.Get("doc")}
		s.sections = append(s.sections, sec)
		for j := range sf.Type.NumField() {
			s.keys[sec.name] = append(s.keys[sec.name], sf.Type.Field(j).Name)
			s.addField(sec, sf.Type.Field(j), []int{i, j})
		}
	}
	s.checkDerivations()
	return s
}

func (s *schemaT) addField(sec *section, sf reflect.StructField, index []int) {
	f := &field{path: sf.Name, name: sf.Name, index: index, kind: kindOf(sf.Type)}
	if sec.name != "" {
		f.path = sec.name + "." + sf.Name
	}
	tag := sf.Tag
	f.env, f.doc, f.derive, f.format = tag.Get("env"), tag.Get("doc"), tag.Get("derive"), tag.Get("format")
	f.def, f.hasDef = tag.Lookup("default")
	f.require = tag.Get("required") == "true"
	f.group = tag.Get("group")
	if f.group == "" && len(sec.fields) > 0 {
		f.group = sec.fields[len(sec.fields)-1].group
	}
	if v := tag.Get("values"); v != "" {
		f.values = strings.Split(v, "|")
	}
	if r := tag.Get("range"); r != "" {
		f.spans, f.rng = parseRange(f.path, r)
	}
	checkField(f, tag.Get("json"))
	sec.fields = append(sec.fields, f)
	s.fields = append(s.fields, f)
	s.byPath[f.path] = f
}

// kind is what a field holds, as far as parsing and checking go.
type kind int

const (
	kindUnsupported kind = iota
	kindBool
	kindInt // int or int64
	kindUint32
	kindFloat
	kindString
	kindStrings // []string
)

func kindOf(t reflect.Type) kind {
	switch t.Kind() {
	case reflect.Bool:
		return kindBool
	case reflect.Int, reflect.Int64:
		return kindInt
	case reflect.Uint32:
		return kindUint32
	case reflect.Float64:
		return kindFloat
	case reflect.String:
		return kindString
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return kindStrings
		}
	}
	return kindUnsupported
}

// numeric reports whether the kind holds a number.
func (k kind) numeric() bool { return k == kindInt || k == kindUint32 || k == kindFloat }

// checkField panics on tags that break the rules above; every test trips it.
func checkField(f *field, jsonName string) {
	bad := func(why string) { panic(fmt.Sprintf("config: field %s: %s", f.path, why)) }
	switch {
	case jsonName != f.name:
		bad("json tag must equal the field name")
	case f.env == "" || f.doc == "":
		bad("env and doc tags are required")
	case f.hasDef && f.derive != "":
		bad("default and derive exclude each other")
	}
	switch {
	case f.kind == kindUnsupported:
		bad("unsupported type")
	case f.kind.numeric() && f.spans == nil:
		bad("a number needs a range tag")
	case f.kind.numeric() && !f.hasDef && f.derive == "":
		bad("a number needs a default or derive tag")
	case f.kind == kindBool && !f.hasDef:
		bad("a boolean needs a default tag")
	case !f.kind.numeric() && f.spans != nil:
		bad("a range tag on a field that is not a number")
	}
}

func parseRange(path, r string) ([]span, string) {
	var spans []span
	var text []string
	for _, alt := range strings.Split(r, "|") {
		lo, hi, found := strings.Cut(alt, "..")
		if !found {
			hi = lo
		}
		l, err1 := strconv.ParseFloat(lo, 64)
		h, err2 := strconv.ParseFloat(hi, 64)
		if err1 != nil || err2 != nil || l > h {
			panic(fmt.Sprintf("config: field %s: bad range %q", path, r))
		}
		spans = append(spans, span{l, h})
		text = append(text, alt)
	}
	return spans, strings.Join(text, " or ")
}

// derivation splits a derive tag into the path it refers to and an optional
// sub-directory.
func (f *field) derivation() (ref, sub string) {
	ref, sub, _ = strings.Cut(f.derive, "/")
	return ref, sub
}

// checkDerivations panics when a derive tag names an unknown field, or a
// derived field that is resolved after it.
func (s *schemaT) checkDerivations() {
	order := map[string]int{}
	for i, f := range s.fields {
		order[f.path] = i
	}
	for i, f := range s.fields {
		ref, sub := f.derivation()
		if f.derive == "" || ref == "hostname" {
			continue
		}
		r, ok := s.byPath[ref]
		switch {
		case !ok:
			panic("config: field " + f.path + ": derive names unknown field " + ref)
		case r.kind != f.kind || (sub != "" && f.kind != kindString):
			panic("config: field " + f.path + ": derive from a field of another type")
		case r.derive != "" && order[ref] > i:
			panic("config: field " + f.path + ": derive from a derived field declared later")
		}
	}
}

// value is the field's reflect value within root, a Config.
func (f *field) value(root reflect.Value) reflect.Value {
	return root.FieldByIndex(f.index)
}

// canonical returns the allowed value that s matches case-insensitively, or
// s itself when none does.
func (f *field) canonical(s string) string {
	for _, v := range f.values {
		if strings.EqualFold(v, s) {
			return v
		}
	}
	return s
}

func (s *schemaT) isSection(name string) bool {
	for _, sec := range s.sections[1:] {
		if sec.name == name {
			return true
		}
	}
	return false
}

// defaults is the Config the default tags describe, derived fields unset.
func defaults() Config {
	var c Config
	root := reflect.ValueOf(&c).Elem()
	for _, f := range schema.fields {
		if !f.hasDef {
			continue
		}
		if err := setText(f, f.value(root), f.def); err != nil {
			panic(fmt.Sprintf("config: field %s: default %q: %v", f.path, f.def, err))
		}
	}
	return c
}

// resolve replaces the zero value of every derived field by what its
// derive tag names.
func (c *Config) resolve() {
	root := reflect.ValueOf(c).Elem()
	for _, f := range schema.fields {
		v := f.value(root)
		if f.derive == "" || !v.IsZero() {
			continue
		}
		ref, sub := f.derivation()
		switch {
		case ref == "hostname":
			name, _ := os.Hostname() // empty on failure; Validate reports it
			v.SetString(name)
		case sub != "":
			v.SetString(filepath.Join(schema.byPath[ref].value(root).String(), sub))
		default:
			v.Set(schema.byPath[ref].value(root))
		}
	}
}
