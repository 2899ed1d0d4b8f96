package syntax

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestSyntaxErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      string // "line:col: message" of the first error, as a prefix
		hint      string // substring of its hint
		count     int    // number of errors
	}{
		{"missing DO (C4)", `DEFINE ACTION X ON EVERY 10 SECONDS PUBLISH TOPIC "t" WITH 1`,
			"1:37: missing DO after the trigger ON EVERY, found PUBLISH", "ON EVERY 10 SECONDS DO", 1},
		{"misspelt DO", "DEFINE ACTION X ON START D0\n    PUBLISH TOPIC \"t\" WITH 1",
			"1:26: expected DO after the trigger", "did you mean DO?", 1},
		{"misspelt statement", "DEFINE ACTION X\nON START DO\n    PUBLSH TOPIC \"t\" WITH 1\n    SETT \"a\" WITH 1\n    PUBLISH TOPIC \"t\" WITH 1",
			"3:5: unknown statement PUBLSH", "did you mean PUBLISH?", 2},
		{"misspelt definition kind", "DEFINE ACTON X ON START DO PUBLISH TOPIC \"t\" WITH 1",
			"1:8: expected ACTION, MODEL, RULE or CONNECTOR", "did you mean ACTION?", 1},
		{"misspelt trigger", "DEFINE ACTION X ON TOPPIC \"a\" DO PUBLISH TOPIC \"t\" WITH 1",
			"1:20: unknown trigger TOPPIC", "did you mean TOPIC?", 1},
		{"misspelt unit", "DEFINE ACTION X ON EVERY 5 SECONDZ DO PUBLISH TOPIC \"t\" WITH 1",
			"1:28: expected a time unit", "did you mean SECONDS?", 1},
		{"misspelt type", "DEFINE ACTION X ON TOPIC \"a\" DO SET \"v\" WITH PAYLOAD AS DOUBEL",
			"1:57: expected a type", "did you mean DOUBLE?", 1},
		{"misspelt WITH", "DEFINE ACTION X ON TOPIC \"a\" DO PUBLISH TOPIC \"t\" WTIH 1",
			"1:51: expected WITH after the topic of PUBLISH TOPIC", "did you mean WITH?", 1},
		{"MESSAGE instead of WITH", "DEFINE ACTION X ON TOPIC \"a\" DO PUBLISH TOPIC \"t\" MESSAGE 1",
			"1:51: expected WITH", "write WITH before the value", 1},
		{"empty WITH", "DEFINE ACTION X\nON TOPIC \"a\" DO\n    PUBLISH TOPIC \"t\" WITH\n",
			"3:27: PUBLISH TOPIC needs a value after WITH", "", 1},
		{"body not indented", "DEFINE ACTION X\nON TOPIC \"a\" DO\nPUBLISH TOPIC \"t\" WITH 1",
			"3:1: the statements after DO must be indented", "indent the statements", 1},
		{"indented trigger", "DEFINE ACTION X\n    ON TOPIC \"a\" DO\n        PUBLISH TOPIC \"t\" WITH 1",
			"2:5: the trigger line must not be indented", "same column", 1},
		{"unclosed paren", "DEFINE ACTION X\nON TOPIC \"a\" DO\n    SET \"v\" WITH (1 + 2\n    SET \"w\" WITH 1",
			"4:5: expected ')' to close the '(' at 3:18", "", 1},
		{"bad dedent", "DEFINE ACTION X\nON TOPIC \"a\" DO\n    SET \"v\" WITH 1\n  SET \"w\" WITH 1",
			"4:3: indentation of 2 columns matches no outer level", "4 spaces", 2},
		{"unterminated string", "DEFINE ACTION X ON TOPIC \"a DO\n    SET \"v\" WITH 1",
			"1:26: unterminated string", "", 2},
		{"quoted action name", "DEFINE ACTION \"X\" ON START DO SET \"v\" WITH 1",
			"1:15: the name of the action must be a bare identifier", "without quotes", 1},
		{"no DEFINE", "ACTION X ON START DO SET \"v\" WITH 1",
			"1:1: expected DEFINE, found ACTION", "", 1},
		{"misspelt DEFINE", "DEFNE ACTION X ON START DO SET \"v\" WITH 1",
			"1:1: expected DEFINE, found DEFNE", "did you mean DEFINE?", 1},
		{"else without if", "DEFINE ACTION X\nON START DO\n    ELSE\n        SET \"v\" WITH 1",
			"3:5: unknown statement ELSE", "ELSE must follow an IF", 1},
		{"loop without until", "DEFINE ACTION X\nON START DO\n    LOOP\n        SET \"v\" WITH 1\n",
			"5:1: LOOP needs UNTIL", "UNTIL <condition>", 1},
		{"expression IF needs ELSE", "DEFINE ACTION X ON START DO SET \"v\" WITH IF 1 THEN 2",
			"1:53: expected ELSE in a conditional value", "", 1},
		{"keyword as value", "DEFINE ACTION X ON START DO SET \"v\" WITH THEN",
			"1:42: expected a value, found the keyword THEN", "", 1},
		{"assignment without SET", "DEFINE ACTION X\nON START DO\n    x = 1\n",
			"3:5: unknown statement x", `SET "X" WITH`, 1},
		{"rule without effect", "DEFINE RULE R WITH PRIORITY 1 FOR Publish IF USER IS \"a\" THEN ALOW",
			"1:63: expected ALLOW, DENY or IF", "did you mean ALLOW?", 1},
		{"rule IS on a value", "DEFINE RULE R WITH PRIORITY 1 FOR Publish IF PAYLOAD IS \"a\" THEN ALLOW",
			"1:54: IS compares USER", "", 1},
		{"model bad option", "DEFINE MODEL M WITH TOPIC \"m\" COLAPSED",
			"1:31: unexpected COLAPSED in the header of model M", "did you mean COLLAPSED?", 1},
		{"model WITH VALUE", "DEFINE MODEL M\n    ADD STRING \"a\" WITH VALUE \"x\"",
			"2:25: WITH VALUE is not LoT", "", 1},
		{"model bad field type", "DEFINE MODEL M\n    ADD STRNG \"a\"",
			"2:9: unknown field type STRNG", "did you mean STRING?", 1},
		{"connector without type", "DEFINE CONNECTOR C\n    ADD MODBUS_CONFIG",
			"1:19: expected WITH after DEFINE CONNECTOR C", "", 1},
		{"connector stray line", "DEFINE CONNECTOR C WITH TYPE MODBUS_TCP\n    ADDD MODBUS_CONFIG\n",
			"2:5: expected ADD <block> or WITH", "did you mean ADD?", 1},
		{"connector empty setting", "DEFINE CONNECTOR C WITH TYPE MODBUS_TCP\n    ADD MODBUS_CONFIG\n        WITH HOST\n",
			"3:18: setting HOST needs a value", "", 1},
		{"garbage after definition", "DEFINE RULE R WITH PRIORITY 1 FOR Connect ALLOW DENY",
			"1:49: unexpected DENY after the definition", "", 1},
		{"one error per bad definition", "DEFINE ACTION X ON\nDEFINE ACTION Y ON START\nDEFINE ACTION Z ON START DO SET \"v\" WITH 1",
			"1:19: unknown trigger end of line", "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.lot", tt.src)
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("no error for %q", tt.src)
			}
			first := list[0]
			got := first.Pos.String() + ": " + first.Msg
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("error\n got %s\nwant %s", got, tt.want)
			}
			if !strings.Contains(first.Hint, tt.hint) {
				t.Errorf("hint %q, want it to contain %q", first.Hint, tt.hint)
			}
			if len(list) != tt.count {
				t.Errorf("%d errors, want %d:\n%s", len(list), tt.count, list.Format())
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	_, err := Parse("prog.lot", "DEFINE ACTION X\nON START DO\n\tPUBLSH TOPIC \"t\" WITH 1\n")
	got := err.(ErrorList).Format()
	want := "prog.lot:3:2: unknown statement PUBLSH\n\tPUBLSH TOPIC \"t\" WITH 1\n\t^\nhint: did you mean PUBLISH?\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if one := err.Error(); one != "prog.lot:3:2: unknown statement PUBLSH; did you mean PUBLISH?" {
		t.Errorf("Error() = %q", one)
	}
}

func TestErrorLimit(t *testing.T) {
	src := strings.Repeat("DEFINE ACTON X\n", 100)
	_, err := Parse("t", src)
	if n := len(err.(ErrorList)); n != maxErrors {
		t.Errorf("%d errors, want %d", n, maxErrors)
	}
}

func TestDeepNesting(t *testing.T) {
	for _, src := range []string{
		"DEFINE ACTION X ON START DO SET \"v\" WITH " + strings.Repeat("(", 5000) + "1",
		"DEFINE ACTION X ON START DO SET \"v\" WITH " + strings.Repeat("NOT ", 5000) + "1",
		"DEFINE ACTION X ON START DO SET \"v\" WITH " + strings.Repeat("- ", 5000) + "1",
		"DEFINE ACTION X ON START DO " + strings.Repeat("IF 1 THEN ", 5000) + "SET \"v\" WITH 1",
		"DEFINE ACTION X ON START DO SET \"v\" WITH " + strings.Repeat("[{\"a\":", 3000),
	} {
		_, err := Parse("t", src)
		if err == nil || !strings.Contains(err.Error(), "too deeply nested") {
			t.Errorf("err = %v", err)
		}
	}
}

// TestLargeSource parses thousands of definitions: the token budget that
// guards against loops must not trip on real programs.
func TestLargeSource(t *testing.T) {
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "DEFINE ACTION A%d\nON TOPIC \"in/+/x\" DO\n    SET \"v\" WITH [%s]\n", i, strings.Repeat("((1 + 2) * -3), ", 20))
		b.WriteString("    IF GET JSON \"a.b\" IN PAYLOAD AS DOUBLE > 1 AND NOT {v} == EMPTY THEN\n        PUBLISH TOPIC \"out/\" + TOPIC POSITION 2 WITH {v}\n")
	}
	f, err := Parse("big.lot", b.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Defs) != 2000 {
		t.Errorf("%d definitions", len(f.Defs))
	}
}
