package syntax

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestTriggers(t *testing.T) {
	tests := []struct {
		src  string
		want string // dump of the trigger
	}{
		{`ON TOPIC "a/+/b"`, `Trigger{Kind:ON TOPIC Topic:StringLit{Value:"a/+/b"}}`},
		{`ON CHANGE "meter/#"`, `Trigger{Kind:ON CHANGE Topic:StringLit{Value:"meter/#"}}`},
		{`ON EVERY 10 SECONDS`, `Trigger{Kind:ON EVERY Count:10 CountText:"10" Unit:SECONDS}`},
		{`on every 1 second`, `Trigger{Kind:ON EVERY Count:1 CountText:"1" Unit:SECONDS}`},
		{`ON EVERY 500 MILLISECONDS`, `Trigger{Kind:ON EVERY Count:500 CountText:"500" Unit:MILLISECONDS}`},
		{`ON EVERY 2 MONTH`, `Trigger{Kind:ON EVERY Count:2 CountText:"2" Unit:MONTHS}`},
		{`ON EVERY -5 MINUTES`, `Trigger{Kind:ON EVERY Count:-5 CountText:"-5" Unit:MINUTES}`},
		{`ON EVERY MONDAY AT "07:30"`, `Trigger{Kind:ON EVERY ... AT Day:"MONDAY" At:"07:30"}`},
		{`ON EVERY DAY AT "06:00"`, `Trigger{Kind:ON EVERY ... AT Day:"DAY" At:"06:00"}`},
		{`ON EVERY WEEKEND AT "10:00:00"`, `Trigger{Kind:ON EVERY ... AT Day:"WEEKEND" At:"10:00:00"}`},
		{`ON TIMESTAMP "12:00:00"`, `Trigger{Kind:ON TIMESTAMP At:"12:00:00"}`},
		{`ON TIMESTAMP "24-12-2026 18:00:00"`, `Trigger{Kind:ON TIMESTAMP At:"24-12-2026 18:00:00"}`},
		{`ON START`, `Trigger{Kind:ON START}`},
		{`ON CONNECT`, `Trigger{Kind:ON CONNECT}`},
		{`ON DISCONNECT`, `Trigger{Kind:ON DISCONNECT}`},
		{`ON SUBSCRIBE`, `Trigger{Kind:ON SUBSCRIBE}`},
		{`ON SUBSCRIBE "alarms/#"`, `Trigger{Kind:ON SUBSCRIBE Topic:StringLit{Value:"alarms/#"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			for _, layout := range []string{" ", "\n"} {
				f := mustParse(t, "DEFINE ACTION X"+layout+tt.src+" DO PUBLISH TOPIC \"t\" WITH 1")
				if got := dump(f.Defs[0].(*Action).Trigger); got != tt.want {
					t.Errorf("got  %s\nwant %s", got, tt.want)
				}
			}
		})
	}
}

func TestTriggerInterval(t *testing.T) {
	f := mustParse(t, "DEFINE ACTION X ON EVERY 1.5 MINUTES DO PUBLISH TOPIC \"t\" WITH 1")
	if d, ok := f.Defs[0].(*Action).Trigger.Interval(); !ok || d != 90*time.Second {
		t.Errorf("interval %v %v", d, ok)
	}
}

// TestStatements compares the dump of an action's body, written in the
// layout form.
func TestStatements(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"set separators", "SET \"a\" WITH 1\nSET b TO 2\nSET \"c\" = 3\nSET {d} AS 4",
			`[SetStmt{Name:"a" Value:NumberLit{Text:"1" Value:1}} SetStmt{Name:"b" Value:NumberLit{Text:"2" Value:2}} SetStmt{Name:"c" Value:NumberLit{Text:"3" Value:3}} SetStmt{Name:"d" Value:NumberLit{Text:"4" Value:4}}]`},
		{"keep topic", `KEEP TOPIC "s/" + {x} WITH PAYLOAD`,
			`[PublishStmt{Keep:true Topic:BinaryExpr{X:StringLit{Value:"s/"} Op:+ Y:VarRef{Name:"x"}} Value:PayloadExpr{}}]`},
		{"publish to REPLACE topic", `PUBLISH TOPIC REPLACE "id" WITH PAYLOAD IN "sensor/id/status" WITH "active"`,
			`[PublishStmt{Topic:ReplaceExpr{Find:StringLit{Value:"id"} With:PayloadExpr{} Source:StringLit{Value:"sensor/id/status"}} Value:StringLit{Value:"active"}}]`},
		{"publish model inline", `PUBLISH MODEL "M" TO "t" WITH a = 1, b = "x"`,
			`[PublishModelStmt{Model:"M" Topic:StringLit{Value:"t"} Fields:[Assign{Name:"a" Value:NumberLit{Text:"1" Value:1}} Assign{Name:"b" Value:StringLit{Value:"x"}}]}]`},
		{"if else if on one line", "IF {a} THEN\n    SET \"x\" WITH 1\nELSE IF {b} THEN\n    SET \"x\" WITH 2\nENDIF",
			`[IfStmt{Cond:VarRef{Name:"a"} Then:[SetStmt{Name:"x" Value:NumberLit{Text:"1" Value:1}}] Else:[IfStmt{Cond:VarRef{Name:"b"} Then:[SetStmt{Name:"x" Value:NumberLit{Text:"2" Value:2}}] ElseIf:true}]}]`},
		{"nested else if", "IF {a} THEN\n    SET \"x\" WITH 1\nELSE\n    IF {b} THEN\n        SET \"x\" WITH 2",
			`[IfStmt{Cond:VarRef{Name:"a"} Then:[SetStmt{Name:"x" Value:NumberLit{Text:"1" Value:1}}] Else:[IfStmt{Cond:VarRef{Name:"b"} Then:[SetStmt{Name:"x" Value:NumberLit{Text:"2" Value:2}}]}]}]`},
		{"inline if then newline else", "IF {a} THEN SET \"x\" WITH 1\nELSE SET \"x\" WITH 2",
			`[IfStmt{Cond:VarRef{Name:"a"} Then:[SetStmt{Name:"x" Value:NumberLit{Text:"1" Value:1}}] Else:[SetStmt{Name:"x" Value:NumberLit{Text:"2" Value:2}}]}]`},
		{"switch at switch level", "SWITCH PAYLOAD\nCASE 1 THEN SET \"x\" WITH 1\nDEFAULT THEN SET \"x\" WITH 0",
			`[SwitchStmt{Subject:PayloadExpr{} Cases:[Case{Values:[NumberLit{Text:"1" Value:1}] Body:[SetStmt{Name:"x" Value:NumberLit{Text:"1" Value:1}}]}] Default:[SetStmt{Name:"x" Value:NumberLit{Text:"0"}}] HasDefault:true}]`},
		{"loop inline", `LOOP SET "i" WITH {i} + 1 UNTIL {i} > 3`,
			`[LoopStmt{Body:[SetStmt{Name:"i" Value:BinaryExpr{X:VarRef{Name:"i"} Op:+ Y:NumberLit{Text:"1" Value:1}}}] Until:BinaryExpr{X:VarRef{Name:"i"} Op:> Y:NumberLit{Text:"3" Value:3}}}]`},
		{"call on one line", `CALL ACTION Avg WITH a = 1, b = {y} RETURN r, s`,
			`[CallActionStmt{Name:"Avg" Args:[Assign{Name:"a" Value:NumberLit{Text:"1" Value:1}} Assign{Name:"b" Value:VarRef{Name:"y"}}] Returns:[Ident{Name:"r"} Ident{Name:"s"}]}]`},
		{"call split over lines", "CALL ACTION Avg\n    WITH a = 1,\n        b = 2\n    RETURN r\nSET \"z\" WITH {r}",
			`[CallActionStmt{Name:"Avg" Args:[Assign{Name:"a" Value:NumberLit{Text:"1" Value:1}} Assign{Name:"b" Value:NumberLit{Text:"2" Value:2}}] Returns:[Ident{Name:"r"}]} SetStmt{Name:"z" Value:VarRef{Name:"r"}}]`},
		{"call without args", `CALL ACTION LampOn`, `[CallActionStmt{Name:"LampOn"}]`},
		{"trigger event", `TRIGGER "ListParts" TO PartsDB WITH PAYLOAD`,
			`[TriggerEventStmt{Event:StringLit{Value:"ListParts"} Connector:"PartsDB" Value:PayloadExpr{}}]`},
		{"env", "KEEP ENV \"A\" WITH 1\nDELETE SECRET \"B\"",
			`[EnvStmt{Name:StringLit{Value:"A"} Value:NumberLit{Text:"1" Value:1}} EnvStmt{Secret:true Delete:true Name:StringLit{Value:"B"}}]`},
		{"call python", "CALL PYTHON \"S.f\" WITH (PAYLOAD) RETURN AS {v}",
			`[UnsupportedStmt{Feature:"CALL PYTHON" Text:"CALL PYTHON \"S.f\" WITH (PAYLOAD) RETURN AS {v}"}]`},
		{"call llm", `CALL LLM "R" METHOD "generate" WITH prompt = PAYLOAD RETURN AS {v}`,
			`[UnsupportedStmt{Feature:"CALL LLM" Text:"CALL LLM \"R\" METHOD \"generate\" WITH prompt = PAYLOAD RETURN AS {v}"}]`},
		{"statements on one line", `SET "a" WITH 1 PUBLISH TOPIC "t" WITH {a}`,
			`[SetStmt{Name:"a" Value:NumberLit{Text:"1" Value:1}} PublishStmt{Topic:StringLit{Value:"t"} Value:VarRef{Name:"a"}}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := "    " + strings.ReplaceAll(tt.body, "\n", "\n    ")
			f := mustParse(t, "DEFINE ACTION X\nON TOPIC \"in\" DO\n"+body+"\n")
			if got := dump(f.Defs[0].(*Action).Body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestFlatForms(t *testing.T) {
	tests := []struct{ src, want string }{
		{`DEFINE ACTION X ON EVERY 10 SECONDS DO PUBLISH TOPIC "t" WITH "hi"`,
			`[PublishStmt{Topic:StringLit{Value:"t"} Value:StringLit{Value:"hi"}}]`},
		{`DEFINE ACTION Y ON TOPIC "a" DO IF PAYLOAD > 1 THEN PUBLISH TOPIC "b" WITH 1 ELSE PUBLISH TOPIC "c" WITH 0`,
			`[IfStmt{Cond:BinaryExpr{X:PayloadExpr{} Op:> Y:NumberLit{Text:"1" Value:1}} Then:[PublishStmt{Topic:StringLit{Value:"b"} Value:NumberLit{Text:"1" Value:1}}] Else:[PublishStmt{Topic:StringLit{Value:"c"} Value:NumberLit{Text:"0"}}]}]`},
		{`DEFINE ACTION Y ON TOPIC "a" DO IF PAYLOAD == "1" THEN SET "x" WITH 1 PUBLISH TOPIC "b" WITH {x} ELSE IF PAYLOAD == "2" THEN PUBLISH TOPIC "c" WITH 2 ELSE PUBLISH TOPIC "d" WITH 3`,
			`[IfStmt{Cond:BinaryExpr{X:PayloadExpr{} Op:== Y:StringLit{Value:"1"}} Then:[SetStmt{Name:"x" Value:NumberLit{Text:"1" Value:1}} PublishStmt{Topic:StringLit{Value:"b"} Value:VarRef{Name:"x"}}] Else:[IfStmt{Cond:BinaryExpr{X:PayloadExpr{} Op:== Y:StringLit{Value:"2"}} Then:[PublishStmt{Topic:StringLit{Value:"c"} Value:NumberLit{Text:"2" Value:2}}] Else:[PublishStmt{Topic:StringLit{Value:"d"} Value:NumberLit{Text:"3" Value:3}}] ElseIf:true}]}]`},
		{`DEFINE ACTION Z ON TOPIC "a" DO SET "x" WITH PAYLOAD SET "y" WITH {x} * 2 PUBLISH TOPIC "b" WITH {y}`,
			`[SetStmt{Name:"x" Value:PayloadExpr{}} SetStmt{Name:"y" Value:BinaryExpr{X:VarRef{Name:"x"} Op:* Y:NumberLit{Text:"2" Value:2}}} PublishStmt{Topic:StringLit{Value:"b"} Value:VarRef{Name:"y"}}]`},
		{`DEFINE ACTION L DO PUBLISH TOPIC "lamp" WITH "true"`,
			`[PublishStmt{Topic:StringLit{Value:"lamp"} Value:StringLit{Value:"true"}}]`},
		{`DEFINE ACTION Avg INPUT a AS DOUBLE INPUT b AS DOUBLE DO SET "avg" WITH ({a} + {b}) / 2 RETURN OUTPUT avg`,
			`[SetStmt{Name:"avg" Value:BinaryExpr{X:BinaryExpr{X:VarRef{Name:"a"} Op:+ Y:VarRef{Name:"b"}} Op:/ Y:NumberLit{Text:"2" Value:2}}}]`},
		{"\uFEFFDEFINE ACTION B ON START DO PUBLISH TOPIC \"b\" WITH 1",
			`[PublishStmt{Topic:StringLit{Value:"b"} Value:NumberLit{Text:"1" Value:1}}]`},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			f := mustParse(t, tt.src)
			if got := dump(f.Defs[0].(*Action).Body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestCallable(t *testing.T) {
	src := "DEFINE ACTION F\nINPUT a AS double\nINPUT b AS JSON\nDO\n    SET \"x\" WITH {a}\nRETURN\n    OUTPUT x\n    OUTPUT y\nDESCRIPTION \"adds\"\n"
	a := mustParse(t, src).Defs[0].(*Action)
	want := `Action{Kind:ACTION Keyword:"ACTION" Name:"F" Inputs:[Input{Name:"a" Type:"DOUBLE"} Input{Name:"b" Type:"JSON"}] Body:[SetStmt{Name:"x" Value:VarRef{Name:"a"}}] Outputs:[Output{Name:"x"} Output{Name:"y"}] Description:StringLit{Value:"adds"}}`
	if got := dump(a); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if a.Trigger != nil {
		t.Error("callable has a trigger")
	}
}

func TestModels(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"header options", `DEFINE MODEL M COLLAPSED FROM Base WITH TOPIC "m/+" WITH RETAIN AND QOS1 WITH FORMAT JSON`,
			`Model{Kind:MODEL Keyword:"MODEL" Name:"M" Collapsed:true From:"Base" Topic:StringLit{Value:"m/+"} Retain:true QoS:1 Format:"JSON"}`},
		{"flat", `DEFINE MODEL M WITH TOPIC "m" ADD STRING "a" WITH TOPIC "a" AS TRIGGER ADD INT "b" WITH 2`,
			`Model{Kind:MODEL Keyword:"MODEL" Name:"M" Topic:StringLit{Value:"m"} Fields:[Field{Type:"STRING" Name:"a" Topic:StringLit{Value:"a"} IsTrigger:true} Field{Type:"INT" Name:"b" Value:NumberLit{Text:"2" Value:2}}]}`},
		{"keep", `DEFINE MODEL M WITH TOPIC "m" KEEP`,
			`Model{Kind:MODEL Keyword:"MODEL" Name:"M" Topic:StringLit{Value:"m"} Keep:true}`},
		{"fields", "DEFINE MODEL M WITH TOPIC \"m\"\n" +
			"    ADD \"untyped\" WITH 1\n" +
			"    ADD TIMESTAMP \"ts\" WITH TIMESTAMP \"UTC\"\n" +
			"    ADD STRING \"id\" WITH RANDOM UUID\n" +
			"    ADD DOUBLE \"cost\" WITH (total_energy * energy_price)\n" +
			"    ADD OBJECT \"o\" WITH {\"a\": 1}\n" +
			"    ADD COLLECTION \"items\" OF Item\n" +
			"    ADD ARRAY \"readings\"\n" +
			"        ADD DOUBLE \"v\" WITH TOPIC \"r/v\" AS TRIGGER\n" +
			"    STORE IN \"db\" WITH TABLE \"t\"\n",
			`Model{Kind:MODEL Keyword:"MODEL" Name:"M" Topic:StringLit{Value:"m"} Fields:[` +
				`Field{Name:"untyped" Value:NumberLit{Text:"1" Value:1}} ` +
				`Field{Type:"TIMESTAMP" Name:"ts" Value:TimestampExpr{Format:StringLit{Value:"UTC"}}} ` +
				`Field{Type:"STRING" Name:"id" Value:RandomExpr{Kind:1}} ` +
				`Field{Type:"DOUBLE" Name:"cost" Value:BinaryExpr{X:Ident{Name:"total_energy"} Op:* Y:Ident{Name:"energy_price"}}} ` +
				`Field{Type:"OBJECT" Name:"o" Value:ObjectLit{Fields:[ObjectField{Key:"a" Value:NumberLit{Text:"1" Value:1}}]}} ` +
				`Field{Name:"items" Collection:true Of:"Item"} ` +
				`Field{Type:"ARRAY" Name:"readings" Items:[Field{Type:"DOUBLE" Name:"v" Topic:StringLit{Value:"r/v"} IsTrigger:true}]}] ` +
				`Unsupported:[UnsupportedStmt{Feature:"model STORE" Text:"STORE IN \"db\" WITH TABLE \"t\""}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dump(mustParse(t, tt.src).Defs[0]); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestRules(t *testing.T) {
	tests := []struct{ src, want string }{
		{`DEFINE RULE AllowPublishTopic WITH PRIORITY 1 FOR Publish TO TOPIC "#" ALLOW`,
			`Rule{Kind:RULE Keyword:"RULE" Name:"AllowPublishTopic" Priority:1 Scope:"Publish" Topic:StringLit{Value:"#"} Then:ALLOW}`},
		{"DEFINE RULE C WITH PRIORITY 5 FOR Connect\n    DENY",
			`Rule{Kind:RULE Keyword:"RULE" Name:"C" Priority:5 Scope:"Connect" Then:DENY}`},
		{`DEFINE RULE G WITH PRIORITY 5 FOR Subscribe IF USER IN GROUP "ops" AND NOT USER IS "x" THEN ALLOW ELSE DENY`,
			`Rule{Kind:RULE Keyword:"RULE" Name:"G" Priority:5 Scope:"Subscribe" Cond:BinaryExpr{X:RuleTest{Subject:"USER" Op:"IN GROUP" Arg:StringLit{Value:"ops"}} Op:AND Y:UnaryExpr{Op:NOT X:RuleTest{Subject:"USER" Op:"IS" Arg:StringLit{Value:"x"}}}} Then:ALLOW Else:DENY}`},
		{`DEFINE RULE T WITH PRIORITY 5 FOR Publish IF (TOPIC EXISTS "a" OR GET TOPIC "mode" IS "open") AND CLIENTID MATCHES "x" THEN ALLOW`,
			`Rule{Kind:RULE Keyword:"RULE" Name:"T" Priority:5 Scope:"Publish" Cond:BinaryExpr{X:BinaryExpr{X:RuleTest{Subject:"TOPIC" Op:"EXISTS" Arg:StringLit{Value:"a"}} Op:OR Y:RuleTest{Subject:"GET TOPIC" Topic:StringLit{Value:"mode"} Op:"IS" Arg:StringLit{Value:"open"}}} Op:AND Y:RuleTest{Subject:"CLIENTID" Op:"MATCHES" Arg:StringLit{Value:"x"}}} Then:ALLOW}`},
		{"DEFINE RULE I WITH PRIORITY 5 FOR Publish\nIF USER IS \"a\" THEN ALLOW\nELSE DENY",
			`Rule{Kind:RULE Keyword:"RULE" Name:"I" Priority:5 Scope:"Publish" Cond:RuleTest{Subject:"USER" Op:"IS" Arg:StringLit{Value:"a"}} Then:ALLOW Else:DENY}`},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			if got := dump(mustParse(t, tt.src).Defs[0]); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestConnectors(t *testing.T) {
	src := "DEFINE ROUTE S7a WITH TYPE S7\n" +
		"    ADD S7_CONFIG\n" +
		"        WITH IP \"10.0.0.9\"\n" +
		"        WITH RACK 0 WITH SLOT -1\n" +
		"    ADD ROUTE_CONFIG\n" +
		"        WITH CLUSTER_NODE \"n2\"\n" +
		"        WITH OVERLOAD_POLICY lossless\n" +
		"    ADD MAPPING \"m 1\" WITH EVERY 500 MILLISECONDS\n" +
		"        ADD TAG T1\n" +
		"            WITH ADDRESS DB1.DBD0\n" +
		"            WITH NODE ns=2;s=Temp\n" +
		"            WITH USER GET ENV \"U\"\n" +
		"            WITH ON true\n" +
		"    STORE Files WITH TABLE_NAME \"t\"\n"
	c := mustParse(t, src).Defs[0].(*Connector)
	if c.Type != "SIEMENS_S7" || c.TypeWritten != "S7" || c.Keyword != "ROUTE" || c.Kind != KindConnector {
		t.Errorf("header %s %s %s", c.Type, c.TypeWritten, c.Keyword)
	}
	cc := c.Block("CONNECTOR_CONFIG")
	if cc == nil || cc.Written != "ROUTE_CONFIG" || cc.Pair("CLUSTER_NODE").Value().Text != "n2" {
		t.Fatalf("connector config %s", dump(cc))
	}
	if v := cc.Pair("OVERLOAD_POLICY").Value(); v.Kind != ValueWord || v.Text != "lossless" {
		t.Errorf("policy %s", dump(v))
	}
	s7 := c.Block("S7_CONFIG")
	if v := s7.Pair("SLOT").Value(); v.Kind != ValueNumber || v.Number != -1 {
		t.Errorf("slot %s", dump(v))
	}
	if v := s7.Pair("RACK").Value(); v.Kind != ValueNumber || v.Number != 0 {
		t.Errorf("rack %s", dump(v))
	}
	m := c.Block("MAPPING")
	if m.Name != "m 1" {
		t.Errorf("mapping name %q", m.Name)
	}
	if d, ok := m.Pair("EVERY").Interval(); !ok || d != 500*time.Millisecond {
		t.Errorf("interval %v %v", d, ok)
	}
	tag := m.Block("TAG")
	for key, want := range map[string]string{"ADDRESS": "word DB1.DBD0", "NODE": "word ns=2;s=Temp",
		"USER": "env U", "ON": "bool true"} {
		v := tag.Pair(key).Value()
		if got := v.Kind.String() + " " + v.Text; got != want {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
	}
	st := c.Block("STORE")
	if st == nil || st.Name != "Files" || st.Pair("TABLE_NAME").Value().Text != "t" {
		t.Errorf("store %s", dump(st))
	}
}

func TestUnsupportedDefs(t *testing.T) {
	src := "DEFINE PANEL \"Line1\"\n    WITH TITLE \"x\"\n    ADD COMPONENT \"Stop\" WITH TYPE \"button\"\n        ON CLICK DO\n            PUBLISH TOPIC \"a\" WITH 1\n" +
		"DEFINE VISU V\nDEFINE THEME \"Dark\"\n    SET \"PRIMARY\" WITH \"#f97316\"\n" +
		"DEFINE THING DEVICE \"lamp/1\" NEEDS TO PUBLISH\nDEFINE AGENT Bot\n    WITH MODEL \"x\"\n" +
		"DEFINE ACTION A ON START DO PUBLISH TOPIC \"a\" WITH 1\n"
	f := mustParse(t, src)
	var got []string
	for _, d := range f.Defs {
		got = append(got, d.Header().Kind.String()+" "+d.Header().Name)
	}
	want := "PANEL Line1, PANEL V, THEME Dark, THING DEVICE, AGENT Bot, ACTION A"
	if strings.Join(got, ", ") != want {
		t.Errorf("got %s", strings.Join(got, ", "))
	}
}

func TestSpans(t *testing.T) {
	src := "// leading comment\nDEFINE ACTION A\nON START DO\n    PUBLISH TOPIC \"a\" WITH 1\n// belongs to A\n\n\n" +
		"DEFINE MODEL M WITH TOPIC \"m\"\n    ADD STRING \"x\"\n\n" +
		"DEFINE RULE R WITH PRIORITY 1 FOR Connect ALLOW"
	f := mustParse(t, src)
	want := []string{
		"DEFINE ACTION A\nON START DO\n    PUBLISH TOPIC \"a\" WITH 1\n// belongs to A",
		"DEFINE MODEL M WITH TOPIC \"m\"\n    ADD STRING \"x\"",
		"DEFINE RULE R WITH PRIORITY 1 FOR Connect ALLOW",
	}
	if len(f.Defs) != len(want) {
		t.Fatalf("%d defs", len(f.Defs))
	}
	for i, d := range f.Defs {
		h := d.Header()
		if h.Text != want[i] || h.Span.Text(src) != want[i] {
			t.Errorf("def %d text %q", i, h.Text)
		}
	}
	if p := f.Defs[1].Header().NamePos; p.Line != 8 || p.Col != 14 {
		t.Errorf("model name at %v", p)
	}
}

func TestNames(t *testing.T) {
	f := mustParse(t, "DEFINE ACTION Line-1.Press ON START DO CALL ACTION Sub-2 WITH a = 1\n")
	a := f.Defs[0].(*Action)
	if a.Name != "Line-1.Press" || a.Body[0].(*CallActionStmt).Name != "Sub-2" {
		t.Errorf("names %q %q", a.Name, a.Body[0].(*CallActionStmt).Name)
	}
}

func TestInspect(t *testing.T) {
	f := mustParse(t, "DEFINE ACTION A\nON TOPIC \"a\" DO\n    IF PAYLOAD > 1 THEN\n        SET \"x\" WITH {y} + TOPIC POSITION 2\n")
	var kinds []string
	Inspect(f.Defs[0], func(n Node) bool {
		kinds = append(kinds, strings.TrimPrefix(strings.TrimPrefix(fmtType(n), "*syntax."), ""))
		return true
	})
	want := "Action Trigger StringLit IfStmt BinaryExpr PayloadExpr NumberLit SetStmt BinaryExpr VarRef TopicPositionExpr NumberLit"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func fmtType(n Node) string { return strings.TrimPrefix(typeName(n), "*syntax.") }

func typeName(v any) string { return fmt.Sprintf("%T", v) }
