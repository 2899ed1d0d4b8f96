package interp

import (
	"errors"
	"strings"
	"testing"

	"gantry/lot/syntax"
)

// evaluate compiles the models of src, binds the instance of model name
// from trigger and evaluates it with the topic values given.
func evaluate(t *testing.T, src, name, trigger string, topics map[string]string, opts *Options) (Instance, string, error) {
	t.Helper()
	d := deploy(t, src, opts)
	for k, v := range topics {
		d.rec.values[k] = []byte(v)
	}
	m := d.reg.models[name]
	inst, ok := m.Instance(trigger)
	if !ok {
		t.Fatalf("%s: no instance for %q", name, trigger)
	}
	out, err := m.Evaluate(d.host, inst)
	return inst, string(out), err
}

func TestModelEvaluate(t *testing.T) {
	cases := []struct {
		name    string
		src     string
		trigger string
		topics  map[string]string
		want    string
		wantErr error
	}{
		{name: "typed fields", trigger: "m/s",
			src:    "DEFINE MODEL M WITH TOPIC \"out\"\n    ADD STRING \"s\" WITH TOPIC \"m/s\" AS TRIGGER\n    ADD INT \"i\" WITH TOPIC \"m/i\"\n    ADD DOUBLE \"d\" WITH TOPIC \"m/d\"\n    ADD BOOL \"b\" WITH TOPIC \"m/b\"\n    ADD OBJECT \"o\" WITH TOPIC \"m/o\"\n",
			topics: map[string]string{"m/s": "12", "m/i": "7.9", "m/d": "3", "m/b": "TRUE", "m/o": `{"k": [1]}`},
			want:   `{"s":"12","i":7,"d":3,"b":true,"o":{"k": [1]}}`},
		{name: "never written is null", trigger: "m/s",
			src:    "DEFINE MODEL M WITH TOPIC \"out\"\n    ADD STRING \"s\" WITH TOPIC \"m/s\" AS TRIGGER\n    ADD INT \"i\" WITH TOPIC \"m/i\"\n    ADD STRING \"none\"\n",
			topics: map[string]string{"m/s": "x"}, want: `{"s":"x","i":null,"none":null}`},
		{name: "untyped fields infer", trigger: "m/a",
			src:    "DEFINE MODEL M WITH TOPIC \"out\"\n    ADD \"a\" WITH TOPIC \"m/a\" AS TRIGGER\n    ADD \"b\" WITH TOPIC \"m/b\"\n    ADD \"c\" WITH TOPIC \"m/c\"\n",
			topics: map[string]string{"m/a": "1.5", "m/b": "false", "m/c": "RUN"}, want: `{"a":1.5,"b":false,"c":"RUN"}`},
		{name: "expressions over fields", trigger: "e/total",
			src: `DEFINE MODEL Cost WITH TOPIC "cost"
    ADD DOUBLE "cost" WITH (total * price)
    ADD DOUBLE "total" WITH TOPIC "e/total" AS TRIGGER
    ADD DOUBLE "price" WITH 0.25
    ADD STRING "level" WITH IF cost > 10 THEN "high" ELSE "low"
    ADD TIMESTAMP "at" WITH TIMESTAMP "ISO"
    ADD STRING "id" WITH RANDOM UUID
`,
			topics: map[string]string{"e/total": "80"},
			want:   `{"cost":20,"total":80,"price":0.25,"level":"high","at":"2025-03-17T14:25:30.123Z","id":"00000000-0000-4000-8100-000000000000"}`},
		{name: "field that needs itself", trigger: "a",
			src:     "DEFINE MODEL M WITH TOPIC \"out\"\n    ADD INT \"t\" WITH TOPIC \"a\" AS TRIGGER\n    ADD INT \"x\" WITH (y + 1)\n    ADD INT \"y\" WITH (x + 1)\n",
			wantErr: ErrCompile},
		{name: "bad cast", trigger: "a",
			src:    "DEFINE MODEL M WITH TOPIC \"out\"\n    ADD INT \"n\" WITH TOPIC \"a\" AS TRIGGER\n",
			topics: map[string]string{"a": "ERR"}, wantErr: ErrCast},
		{name: "array items", trigger: "t/1",
			src:    "DEFINE MODEL M WITH TOPIC \"out\"\n    ADD DOUBLE \"t1\" WITH TOPIC \"t/1\" AS TRIGGER\n    ADD ARRAY \"all\"\n        ADD DOUBLE \"a\" WITH TOPIC \"t/1\"\n        ADD DOUBLE \"b\" WITH TOPIC \"t/2\"\n",
			topics: map[string]string{"t/1": "1.5", "t/2": "2"}, want: `{"t1":1.5,"all":[1.5,2]}`},
		{name: "collection defaults to empty", trigger: "a",
			src:    "DEFINE MODEL Item COLLAPSED\n    ADD STRING \"n\"\nDEFINE MODEL M WITH TOPIC \"out\"\n    ADD STRING \"a\" WITH TOPIC \"a\" AS TRIGGER\n    ADD COLLECTION \"items\" OF Item\n",
			topics: map[string]string{"a": "x"}, want: `{"a":"x","items":[]}`},
		{name: "child overrides in place", trigger: "v",
			src:    "DEFINE MODEL P COLLAPSED\n    ADD STRING \"kind\" WITH \"base\"\n    ADD DOUBLE \"v\"\nDEFINE MODEL C FROM P WITH TOPIC \"out\"\n    ADD DOUBLE \"v\" WITH TOPIC \"v\" AS TRIGGER\n    ADD STRING \"kind\" WITH \"child\"\n    ADD STRING \"extra\" WITH kind + \"!\"\n",
			topics: map[string]string{"v": "2"}, want: `{"kind":"child","v":2,"extra":"child!"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := "M"
			if strings.Contains(c.src, "MODEL Cost") {
				name = "Cost"
			} else if strings.Contains(c.src, "MODEL C FROM") {
				name = "C"
			}
			_, got, err := evaluate(t, c.src, name, c.trigger, c.topics, nil)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("error %v, want %v", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !sameMessage("x="+got, "x="+c.want) {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestModelErrorNamesTheField(t *testing.T) {
	_, _, err := evaluate(t, "DEFINE MODEL M WITH TOPIC \"out\"\n    ADD INT \"n\" WITH TOPIC \"a\" AS TRIGGER\n", "M", "a",
		map[string]string{"a": "ERR"}, nil)
	if want := `model M at 2:5: field "n": cannot cast "ERR" to INT`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestWildcardModel(t *testing.T) {
	src := `DEFINE MODEL Line WITH TOPIC "plant/+/line/+/summary"
    ADD DOUBLE "temp" WITH TOPIC "plant/+/line/+/temp" AS TRIGGER
    ADD STRING "state" WITH TOPIC "plant/+/line/+/state"
    ADD STRING "site" WITH TOPIC "site/+"
`
	topics := map[string]string{
		"plant/p1/line/3/temp": "21.5", "plant/p1/line/3/state": "RUN",
		"plant/p2/line/3/state": "STOP", "site/p1": "north",
	}
	inst, got, err := evaluate(t, src, "Line", "plant/p1/line/3/temp", topics, nil)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Key != "p1/3" || inst.Topic != "plant/p1/line/3/summary" || strings.Join(inst.Bindings, ",") != "p1,3" {
		t.Errorf("instance %+v", inst)
	}
	if want := `{"temp":21.5,"state":"RUN","site":"north"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}

	d := deploy(t, src, nil)
	m := d.reg.models["Line"]
	for _, topic := range []string{"plant/p1/line/3/state", "plant/p1/line/temp", "plant/p1/line/3/temp/x", "other"} {
		if inst, ok := m.Instance(topic); ok {
			t.Errorf("Instance(%q) = %+v, want none", topic, inst)
		}
	}
	if got := strings.Join(m.Triggers(), " "); got != "plant/+/line/+/temp" {
		t.Errorf("Triggers = %s", got)
	}
	if got := strings.Join(m.Sources(), " "); got != "plant/+/line/+/temp plant/+/line/+/state site/+" {
		t.Errorf("Sources = %s", got)
	}
	if !m.Explodes() || m.Collapsed() || m.Retain() || m.QoS() != 0 || m.Topic() != "plant/+/line/+/summary" {
		t.Errorf("header: explodes %v collapsed %v retain %v qos %d topic %s", m.Explodes(), m.Collapsed(), m.Retain(), m.QoS(), m.Topic())
	}
	if got := strings.Join(m.Fields(), ","); got != "temp,state,site" {
		t.Errorf("Fields = %s", got)
	}
}

func TestPatternMatch(t *testing.T) {
	cases := []struct {
		filter, topic string
		want          string // bindings joined by ",", or "-" for no match
	}{
		{"a/b", "a/b", ""},
		{"a/b", "a/c", "-"},
		{"a/+", "a/x", "x"},
		{"a/+", "a/x/y", "-"},
		{"a/+/c", "a/x/c", "x"},
		{"+/+", "a/b", "a,b"},
		{"a/#", "a/x/y", "x/y"},
		{"a/#", "a", ""},
		{"#", "a/b", "a/b"},
		{"#", "$SYS/x", "-"},
		{"+/x", "$SYS/x", "-"},
		{"a/+", "a/", ""},
		{"a/b/c", "a/b", "-"},
	}
	for _, c := range cases {
		b, ok := newPattern(c.filter).match(c.topic)
		got := strings.Join(b, ",")
		if !ok {
			got = "-"
		}
		if got != c.want {
			t.Errorf("match(%q, %q) = %q, want %q", c.filter, c.topic, got, c.want)
		}
	}
}

func TestModelInheritance(t *testing.T) {
	d := deploy(t, "DEFINE MODEL A COLLAPSED\n    ADD STRING \"a\"\nDEFINE MODEL B FROM A COLLAPSED\n    ADD STRING \"b\"\nDEFINE MODEL C FROM B WITH TOPIC \"c\"\n    ADD STRING \"c\"\n", nil)
	if got := strings.Join(d.reg.models["C"].Fields(), ","); got != "a,b,c" {
		t.Errorf("C fields %s, want a,b,c", got)
	}
	for _, c := range []struct{ name, src, want string }{
		{"unknown parent", "DEFINE MODEL X FROM Nope\n    ADD STRING \"x\"\n", "model X at 1:21: unknown parent model Nope"},
		{"itself", "DEFINE MODEL A FROM C\n    ADD STRING \"x\"\n", "model A inherits from itself"},
		{"unknown field", "DEFINE MODEL X\n    ADD STRING \"x\" WITH (y + 1)\n", "model X at 2:26: model X has no field y"},
		{"variable", "DEFINE MODEL X\n    ADD STRING \"x\" WITH {v}\n", "variables do not exist in a model"},
	} {
		m := parseOne(t, c.src).Defs[0].(*syntax.Model)
		if _, err := CompileModel(m, d.reg, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

func TestExplode(t *testing.T) {
	cases := []struct {
		name    string
		payload string
		max     int
		want    []string
		wantErr error
	}{
		{name: "flat", payload: `{"temperature":23.5,"humidity":65.0,"status":"active","on":true,"none":null}`,
			want: []string{"m/temperature=23.5", "m/humidity=65", "m/status=active", "m/on=true", "m/none=null"}},
		{name: "nested objects go deeper", payload: `{"a":{"b":{"c":1}},"d":2}`, want: []string{"m/a/b/c=1", "m/d=2"}},
		{name: "arrays stay JSON", payload: `{"list":[1, {"x":2}]}`, want: []string{`m/list=[1, {"x":2}]`}},
		{name: "escaped strings", payload: `{"s":"a\"b"}`, want: []string{`m/s=a"b`}},
		{name: "wildcard keys skipped", payload: `{"a+":1,"#":2,"ok":3}`, want: []string{"m/ok=3"}},
		{name: "not an object", payload: `42`, want: nil},
		{name: "plain text", payload: `hello`, want: nil},
		{name: "bad object", payload: `{"a":`, wantErr: ErrBadJSON},
		{name: "limit", payload: `{"a":1,"b":2,"c":3}`, max: 2, want: []string{"m/a=1", "m/b=2"}, wantErr: ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := deploy(t, "DEFINE MODEL M WITH TOPIC \"m\"\n", &Options{MaxExplodeTopics: c.max})
			var got []string
			err := d.reg.models["M"].Explode("m", []byte(c.payload), func(topic string, p []byte) error {
				got = append(got, topic+"="+string(p))
				return nil
			})
			if (c.wantErr == nil) != (err == nil) || (c.wantErr != nil && !errors.Is(err, c.wantErr)) {
				t.Fatalf("error %v, want %v", err, c.wantErr)
			}
			if err := sameList(got, c.want); err != nil {
				t.Error(err)
			}
		})
	}

	d := deploy(t, "DEFINE MODEL M COLLAPSED WITH TOPIC \"m\"\n    ADD STRING \"a\" WITH TOPIC \"a\" AS TRIGGER\n", nil)
	if d.reg.models["M"].Explodes() {
		t.Error("a COLLAPSED model explodes")
	}
	refused := errors.New("refused")
	d = deploy(t, "DEFINE MODEL M WITH TOPIC \"m\"\n", nil)
	err := d.reg.models["M"].Explode("m", []byte(`{"a":1}`), func(string, []byte) error { return refused })
	if !errors.Is(err, refused) || !errors.Is(err, ErrEffect) {
		t.Errorf("emit error: %v", err)
	}
}

func TestModelRootKey(t *testing.T) {
	src := "DEFINE MODEL Reading\n    ADD INT \"v\"\nDEFINE MODEL Flat COLLAPSED\n    ADD INT \"v\"\n" + onMsg +
		"    PUBLISH MODEL Reading TO \"r\" WITH v = 1\n    PUBLISH MODEL Flat TO \"f\" WITH v = 2\n"
	opts := testOptions()
	opts.ModelRootKey = true
	d := deploy(t, src, opts)
	if err := d.run("T", "in/a", ""); err != nil {
		t.Fatal(err)
	}
	if err := sameList(d.rec.delivered(), []string{`r={"Reading":{"v":1}}`, `f={"v":2}`}); err != nil {
		t.Error(err)
	}
}
