package check

import (
	"slices"
	"strings"
	"testing"

	"gantry/lot/syntax"
)

// onlyEnv is an Env without the Lister capability.
type onlyEnv struct{}

func (onlyEnv) Callable(name string) (Callable, bool) {
	return Callable{Inputs: []string{"x"}}, name == "Known"
}
func (onlyEnv) Model(string) (Model, bool) { return Model{}, false }

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		env  Env
		src  string
		want []string // "line:col: severity: message" prefixes, in order
	}{
		{"nil env knows nothing", nil, `DEFINE ACTION A ON START DO CALL ACTION Average2`,
			[]string{"1:41: error: unknown callable action Average2"}},
		{"env without Lister", onlyEnv{}, `DEFINE ACTION A ON START DO CALL ACTION Known WITH x = 1 CALL ACTION Knwn`,
			[]string{"1:70: error: unknown callable action Knwn"}},
		{"file definitions are visible in any order", nil,
			"DEFINE ACTION A ON START DO CALL ACTION B WITH v = 1 RETURN r PUBLISH TOPIC \"t\" WITH {r}\nDEFINE ACTION B\nINPUT v AS INT\nDO\n    SET \"o\" WITH {v}\nRETURN\n    OUTPUT o",
			nil},
		{"file definitions replace deployed ones", goldenEnv,
			"DEFINE ACTION Average2\nINPUT x AS DOUBLE\nDO\n    SET \"y\" WITH {x}\nRETURN\n    OUTPUT y\nDEFINE ACTION C ON START DO CALL ACTION Average2 WITH a = 1, b = 2 RETURN r",
			[]string{"7:55: error: Average2 has no INPUT a", "7:62: error: Average2 has no INPUT b"}},
		{"deployed model with FROM in file", goldenEnv,
			"DEFINE MODEL R2 FROM Reading COLLAPSED\n    ADD STRING \"unit\"\nDEFINE ACTION P ON START DO PUBLISH MODEL R2 TO \"r\" WITH device = \"d\", unit = \"C\", tmp = 1",
			[]string{"3:84: error: model R2 has no field tmp"}},
		{"duplicate definitions warn", nil,
			"DEFINE ACTION A ON START DO PUBLISH TOPIC \"a\" WITH 1\nDEFINE ACTION A ON START DO PUBLISH TOPIC \"a\" WITH 2",
			[]string{"2:15: warning: action A is defined again (first at line 1)"}},
		{"syntax errors come back as diagnostics", nil, `DEFINE ACTION A ON START PUBLISH TOPIC "a" WITH 1`,
			[]string{"1:26: error: missing DO after the trigger ON START"}},
		{"session values in session actions", nil,
			`DEFINE ACTION A ON DISCONNECT DO PUBLISH TOPIC "gone/" + CLIENTID WITH DISCONNECTREASON + USER + ENDPOINT + CLEANSESSION`,
			nil},
		{"callable may read PAYLOAD", nil, "DEFINE ACTION A\nDO\n    PUBLISH TOPIC \"a\" WITH PAYLOAD", nil},
		{"input types", nil, "DEFINE ACTION A\nINPUT a AS TIMESTAMP\nINPUT a AS INT\nDO\n    SET \"x\" WITH {a}",
			[]string{"2:12: error: INPUT type TIMESTAMP is not allowed", "3:7: error: INPUT a is declared twice"}},
		{"bytes", nil, `DEFINE ACTION A ON TOPIC "a" DO PUBLISH TOPIC "b" WITH PAYLOAD AS BYTES PUBLISH TOPIC "c" WITH "x" AS BYTES`,
			[]string{"1:100: error: only PAYLOAD AS BYTES is allowed"}},
		{"comparison in a rule condition", nil, `DEFINE RULE R WITH PRIORITY 100 FOR Publish TO TOPIC "a/#" IF GET TOPIC "mode" == "x" THEN ALLOW`,
			[]string{"1:63: error: the comparison == is not supported in a rule condition"}},
		{"ENDPOINT in a rule", nil, `DEFINE RULE R WITH PRIORITY 100 FOR Connect IF ENDPOINT IS "tcp" THEN DENY`,
			[]string{"1:48: error: ENDPOINT IS is not supported in a rule"}},
		{"USER IS TOPIC POSITION in a rule", nil, `DEFINE RULE R WITH PRIORITY 100 FOR Publish TO TOPIC "u/+" IF USER IS TOPIC POSITION 2 THEN ALLOW`,
			[]string{"1:63: error: USER IS TOPIC POSITION is not supported in a rule"}},
		{"supported rule conditions", nil, `DEFINE RULE R WITH PRIORITY 100 FOR Publish TO TOPIC "d/+" IF NOT (USER IS "a" OR CLIENTID IS TOPIC POSITION 2) AND USER HAS AllowedUserManagement THEN ALLOW ELSE DENY`,
			nil},
		{"ON TOPIC on a $ topic", nil, `DEFINE ACTION A ON TOPIC "$SYS/broker/uptime" DO PUBLISH TOPIC "u" WITH PAYLOAD`,
			[]string{"1:26: error: ON TOPIC \"$SYS/broker/uptime\": LoT does not trigger on $ topics"}},
		{"S7 alias is supported", nil, "DEFINE ROUTE S WITH TYPE S7\n    ADD S7_CONFIG\n        WITH IP \"1.2.3.4\"", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := Source("t.lot", tt.src, tt.env)
			var got []string
			for _, d := range diags {
				got = append(got, d.Pos.String()+": "+d.Severity.String()+": "+d.Msg)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("diagnostics:\n%s\nwant %q", Format(diags), tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("got  %s\nwant %s", got[i], tt.want[i])
				}
			}
		})
	}
}

func TestDiagnosticFormat(t *testing.T) {
	_, diags := Source("p.lot", "DEFINE ACTION A\nON START DO\n    CALL ACTION LampOf\n", goldenEnv)
	if len(diags) != 1 || !HasErrors(diags) {
		t.Fatalf("diags %v", diags)
	}
	d := diags[0]
	if got := d.Error(); got != "p.lot:3:17: error: unknown callable action LampOf; did you mean LampOn?" {
		t.Errorf("Error() = %q", got)
	}
	want := "p.lot:3:17: error: unknown callable action LampOf\n    CALL ACTION LampOf\n                ^\nhint: did you mean LampOn?\n"
	if got := d.Format(); got != want {
		t.Errorf("Format() =\n%s\nwant\n%s", got, want)
	}
	if HasErrors([]Diagnostic{{Severity: Warning}}) {
		t.Error("a warning counts as an error")
	}
}

func TestEnvHelpers(t *testing.T) {
	f, err := syntax.Parse("t", "DEFINE ACTION A\nINPUT x AS INT\nINPUT y AS INT\nDO\n    SET \"s\" WITH {x}\nRETURN\n    OUTPUT s\n"+
		"DEFINE ACTION B ON START DO SET \"v\" WITH 1\n"+
		"DEFINE MODEL P COLLAPSED\n    ADD STRING \"a\"\n    ADD STRING \"b\"\nDEFINE MODEL C FROM P\n    ADD STRING \"b\"\n    ADD STRING \"c\"\n")
	if err != nil {
		t.Fatal(err)
	}
	c, ok := CallableOf(f.Defs[0].(*syntax.Action))
	if !ok || !slices.Equal(c.Inputs, []string{"x", "y"}) || c.Outputs != 1 {
		t.Errorf("callable %+v %v", c, ok)
	}
	if _, ok := CallableOf(f.Defs[1].(*syntax.Action)); ok {
		t.Error("an action with a trigger is callable")
	}
	parent := ModelOf(f.Defs[2].(*syntax.Model), Model{})
	child := ModelOf(f.Defs[3].(*syntax.Model), parent)
	if !slices.Equal(child.Fields, []string{"a", "b", "c"}) {
		t.Errorf("child fields %v", child.Fields)
	}
	d := Deployed{Callables: map[string]Callable{"Z": {}, "A": {}}, Models: map[string]Model{"M": {}}}
	if !slices.Equal(d.CallableNames(), []string{"A", "Z"}) || !slices.Equal(d.ModelNames(), []string{"M"}) {
		t.Errorf("names %v %v", d.CallableNames(), d.ModelNames())
	}
}
