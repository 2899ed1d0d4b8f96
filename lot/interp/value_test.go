package interp

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
)

func TestNumberText(t *testing.T) {
	cases := []struct {
		name string
		v    Value
		want string
	}{
		{"int", Int(42), "42"},
		{"negative int", Int(-7), "-7"},
		{"whole float", Float(42.0), "42"},
		{"fraction", Float(21.5), "21.5"},
		{"shortest", Float(0.1), "0.1"},
		{"large", Float(123456789012), "123456789012"},
		{"very large", Float(1e21), "1e+21"},
		{"small", Float(0.000001), "0.000001"},
		{"very small", Float(1e-7), "1e-7"},
		{"negative zero", Float(math.Copysign(0, -1)), "0"},
		{"NaN is EMPTY", Float(math.NaN()), ""},
		{"true", Bool(true), "true"},
		{"null", Null(), "null"},
		{"empty", Value{}, ""},
	}
	for _, c := range cases {
		if got := c.v.Text(); got != c.want {
			t.Errorf("%s: Text() = %q, want %q", c.name, got, c.want)
		}
		if got := string(c.v.Payload()); got != c.want {
			t.Errorf("%s: Payload() = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestParseNumber(t *testing.T) {
	cases := []struct {
		in   string
		want string // "int 3", "double 2.5" or "-" for not a number
	}{
		{"3", "int 3"},
		{" -3 ", "int -3"},
		{"+4", "int 4"},
		{"007", "int 7"},
		{"2.5", "double 2.5"},
		{".5", "double 0.5"},
		{"5.", "double 5"},
		{"1e3", "double 1000"},
		{"-1.5E-2", "double -0.015"},
		{"99999999999999999999", "double 100000000000000000000"},
		{"", "-"},
		{"-", "-"},
		{".", "-"},
		{"1e", "-"},
		{"0x10", "-"},
		{"Inf", "-"},
		{"NaN", "-"},
		{"1_000", "-"},
		{"1e999", "-"},
		{"12abc", "-"},
	}
	for _, c := range cases {
		v, ok := parseNumber(c.in)
		got := "-"
		if ok {
			got = v.Kind().String() + " " + v.Text()
		}
		if got != c.want {
			t.Errorf("parseNumber(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestEqual(t *testing.T) {
	j := func(s string) Value { return Value{kind: KindJSON, s: s} }
	cases := []struct {
		a, b Value
		want bool
	}{
		{Int(1), Float(1), true},
		{String("1.0"), Int(1), true},
		{String("abc"), String("abc"), true},
		{String("abc"), String("ABC"), false},
		{Bool(true), String("TRUE"), true},
		{Bool(false), Int(0), true},
		{Bool(true), Int(2), false},
		{Value{}, String(""), true},
		{Value{}, Null(), true},
		{Value{}, Int(0), false},
		{Null(), String("null"), true},
		{j(`{"a":1}`), j(`{"a":1}`), true},
		{j(`[1]`), String("[1]"), true},
	}
	for _, c := range cases {
		if got := Equal(c.a, c.b); got != c.want {
			t.Errorf("Equal(%s %q, %s %q) = %v", c.a.Kind(), c.a, c.b.Kind(), c.b, got)
		}
		if got := Equal(c.b, c.a); got != c.want {
			t.Errorf("Equal is not symmetric for %q, %q", c.a, c.b)
		}
	}
}

func TestParseJSONAndMembers(t *testing.T) {
	v, err := ParseJSON([]byte(` {"a": 1, "b": "x", "c": [true], "d": {"e": null}} `))
	if err != nil || v.Kind() != KindJSON {
		t.Fatalf("ParseJSON: %v %v", v.Kind(), err)
	}
	keys, vals, ok := Members(v)
	var got []string
	for i := range keys {
		got = append(got, fmt.Sprintf("%s=%s:%s", keys[i], vals[i].Kind(), vals[i]))
	}
	want := []string{"a=int:1", "b=string:x", "c=JSON:[true]", `d=JSON:{"e": null}`}
	if !ok || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Members = %v, %v; want %v", got, ok, want)
	}
	if _, _, ok := Members(String("{}")); ok {
		t.Error("Members of a string")
	}
	if _, err := ParseJSON([]byte(`{"a":}`)); err == nil {
		t.Error("ParseJSON accepted bad JSON")
	}
}

func TestParsePath(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{"a", "a"},
		{"a.b", "a b"},
		{"a.0.b", "a 0# b"},
		{"items[2].n", "items 2# n"},
		{"m[0][1]", "m 0# 1#"},
		{"a..b", "a  b"},
		{"-1", "-1"},
	}
	for _, c := range cases {
		var parts []string
		for _, s := range parsePath(c.in) {
			p := s.key
			if s.index >= 0 {
				p += "#"
			}
			parts = append(parts, p)
		}
		if got := strings.Join(parts, " "); got != c.want {
			t.Errorf("parsePath(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestConcurrentRuns runs one program from many goroutines at once, each
// with its own Host: runs share nothing but the program (and its FILTER
// cache). Run with -race.
func TestConcurrentRuns(t *testing.T) {
	src := `DEFINE ACTION Twice
INPUT x AS INT
DO
    SET "y" WITH {x} * 2
RETURN
    OUTPUT y
` + onMsg + `    SET "re" WITH "[0-9]+"
    SET "n" WITH FILTER PAYLOAD USING REGEX {re}
    CALL ACTION Twice WITH x = {n} RETURN d
    PUBLISH TOPIC "out/" + TOPIC POSITION 2 WITH {d}
`
	base := deploy(t, src, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := newRecorder()
			host := &Host{Effects: rec, Topics: rec, Callables: base.reg}
			for i := 0; i < 200; i++ {
				ev := &Event{Topic: fmt.Sprintf("in/g%d", g), Payload: []byte(fmt.Sprintf("n=%d", i))}
				if err := base.reg.programs["T"].Run(host, ev); err != nil {
					errs <- err
					return
				}
				if got, want := rec.out[i].String(), fmt.Sprintf("out/g%d=%d", g, 2*i); got != want {
					errs <- fmt.Errorf("got %s, want %s", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
