package syntax

import (
	"fmt"
	"reflect"
	"strings"
)

// dump renders a syntax tree compactly for table tests: TypeName{Field:value
// ...} with zero values, positions and source text left out.
func dump(v any) string {
	var b strings.Builder
	dumpValue(&b, reflect.ValueOf(v))
	return b.String()
}

var posType = reflect.TypeOf(Pos{})

func dumpValue(b *strings.Builder, v reflect.Value) {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		dumpValue(b, v.Elem())
	case reflect.Struct:
		dumpStruct(b, v)
	case reflect.Slice:
		b.WriteByte('[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				b.WriteByte(' ')
			}
			dumpValue(b, v.Index(i))
		}
		b.WriteByte(']')
	case reflect.String:
		fmt.Fprintf(b, "%q", v.String())
	default:
		if s, ok := v.Interface().(fmt.Stringer); ok {
			b.WriteString(s.String())
			return
		}
		fmt.Fprint(b, v.Interface())
	}
}

func dumpStruct(b *strings.Builder, v reflect.Value) {
	t := v.Type()
	b.WriteString(t.Name())
	b.WriteByte('{')
	first := true
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		fv := v.Field(i)
		if f.Type == posType || fv.IsZero() || (f.Name == "Quote" && fv.Uint() == '"') {
			continue
		}
		if f.Anonymous {
			dumpFields(b, fv, &first)
			continue
		}
		if !first {
			b.WriteByte(' ')
		}
		first = false
		b.WriteString(f.Name)
		b.WriteByte(':')
		dumpValue(b, fv)
	}
	b.WriteByte('}')
}

// dumpFields writes the fields of an embedded struct (DefHeader) inline.
func dumpFields(b *strings.Builder, v reflect.Value, first *bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		fv := v.Field(i)
		if f.Type == posType || f.Name == "Span" || f.Name == "Text" || fv.IsZero() {
			continue
		}
		if !*first {
			b.WriteByte(' ')
		}
		*first = false
		b.WriteString(f.Name)
		b.WriteByte(':')
		dumpValue(b, fv)
	}
}
