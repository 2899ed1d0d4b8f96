package syntax

import (
	"strings"
	"testing"
)

// lexString renders tokens compactly: words and punctuation as written,
// strings quoted, layout tokens as NL, IN and DE.
func lexString(toks []Token) string {
	var parts []string
	for _, t := range toks {
		switch t.Kind {
		case EOF:
		case NEWLINE:
			parts = append(parts, "NL")
		case INDENT:
			parts = append(parts, "IN")
		case DEDENT:
			parts = append(parts, "DE")
		case STRING:
			parts = append(parts, "s"+string(t.Quote)+t.Value+string(t.Quote))
		case VAR:
			parts = append(parts, "v{"+t.Value+"}")
		case NUMBER:
			parts = append(parts, "n"+t.Text)
		case ILLEGAL:
			parts = append(parts, "?"+t.Text)
		default:
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}

func TestLex(t *testing.T) {
	tests := []struct {
		name, src, want string
		errs            int
	}{
		{"flat", `DEFINE ACTION X ON EVERY 10 SECONDS DO PUBLISH TOPIC "t" WITH "hi"`,
			`DEFINE ACTION X ON EVERY n10 SECONDS DO PUBLISH TOPIC s"t" WITH s"hi" NL`, 0},
		{"indent and dedent", "A\n    B\n        C\nD\n",
			"A NL IN B NL IN C NL DE DE D NL", 0},
		{"tab is one level", "A\n\tB\n\t\tC\n\tD\n",
			"A NL IN B NL IN C NL DE D NL DE", 0},
		{"tab equals four spaces", "A\n\tB\n    C\n", "A NL IN B NL C NL DE", 0},
		{"dedent to no level", "A\n    B\n  C\n", "A NL IN B NL DE C NL", 1},
		{"blank and comment lines keep layout", "A\n\n    // c\n    B\n-- x\n    /* y */\n    C\n",
			"A NL IN B NL C NL DE", 0},
		{"comments", "A // x\nB -- y\nC /* z */ D /* multi\nline */ E\n",
			"A NL B NL C D E NL", 0},
		{"keywords any case", "define Action x", "define Action x NL", 0},
		{"strings", `"a\"b" 'c\'d' "e\\f" "\d+" "x\ny"`,
			`s"a"b" s'c'd' s"e\f" s"\d+" s"x` + "\n" + `y" NL`, 0},
		{"unterminated string", "\"abc\nB", `s"abc" NL B NL`, 1},
		{"unterminated comment", "A /* x", "A NL", 1},
		{"numbers", "1 2.5 1e3 1.5E-3 07 3rd 1.", "n1 n2.5 n1e3 n1.5E-3 n07 n3 rd n1 ?. NL", 0},
		{"operators", "+ - * / % = == != <> < > <= >= ( ) [ ] , :",
			"+ - * / % = == != <> < > <= >= ( ) [ ] , : NL", 0},
		{"variables", "{x} { y } {payload.json.id} {a-b} {", "v{x} v{y} v{payload.json.id} v{a-b} { NL", 0},
		{"json object", `{"a": {x}}`, `{ s"a" : v{x} } NL`, 0},
		{"brackets join lines", "A (1,\n  2)\n    B\n", "A ( n1 , n2 ) NL IN B NL DE", 0},
		{"comma joins lines", "A 1,\n        2\n    B\n", "A n1 , n2 NL IN B NL DE", 0},
		{"unclosed bracket ends at margin", "A (1\nB\n", "A ( n1 NL B NL", 0},
		{"illegal", "a;b $ é", "a ?; b ?$ é NL", 0},
		{"crlf", "A\r\n    B\r\n", "A NL IN B NL DE", 0},
		{"indented first line sets margin", "    A\n    B\n        C\n", "A NL B NL IN C NL DE", 0},
		{"empty", "", "", 0},
		{"only comments", "// a\n/* b */\n", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			toks, errs := Lex("t", tt.src)
			if got := lexString(toks); got != tt.want {
				t.Errorf("tokens\n got %s\nwant %s", got, tt.want)
			}
			if len(errs) != tt.errs {
				t.Errorf("errors = %v, want %d", errs, tt.errs)
			}
			if toks[len(toks)-1].Kind != EOF {
				t.Error("last token is not EOF")
			}
		})
	}
}

func TestLexPositions(t *testing.T) {
	src := "DEFINE ACTION X\nON TOPIC \"é/a\" DO\n\tPUBLISH TOPIC {v} WITH 1"
	toks, _ := Lex("t", src)
	want := map[string]Pos{
		"DEFINE":  {Line: 1, Col: 1, Offset: 0},
		"ON":      {Line: 2, Col: 1, Offset: 16},
		`"é/a"`:   {Line: 2, Col: 10, Offset: 25},
		"DO":      {Line: 2, Col: 16, Offset: 32},
		"PUBLISH": {Line: 3, Col: 2, Offset: 36},
		"{v}":     {Line: 3, Col: 16, Offset: 50},
	}
	for _, tok := range toks {
		if p, ok := want[tok.Text]; ok {
			if tok.Pos != p {
				t.Errorf("%s at %+v, want %+v", tok.Text, tok.Pos, p)
			}
			if src[tok.Pos.Offset:tok.End] != tok.Text {
				t.Errorf("%s: span %q", tok.Text, src[tok.Pos.Offset:tok.End])
			}
			delete(want, tok.Text)
		}
	}
	if len(want) > 0 {
		t.Errorf("tokens not found: %v", want)
	}
}

func TestLexSpaced(t *testing.T) {
	toks, _ := Lex("t", "DB1.DBD0 a .b")
	got := ""
	for _, tok := range toks[:len(toks)-2] {
		if tok.Spaced {
			got += " "
		}
		got += tok.Text
	}
	if got != " DB1.DBD0 a .b" {
		t.Errorf("spacing %q", got)
	}
}
