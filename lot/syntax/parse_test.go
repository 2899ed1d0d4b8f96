package syntax

import (
	"fmt"
	"strings"
	"testing"
)

// sexpr renders an expression as a prefix S-expression so that tests can
// state precedence plainly: (+ 1 (* 2 3)).
func sexpr(e Expr) string {
	switch x := e.(type) {
	case nil:
		return "nil"
	case *StringLit:
		return fmt.Sprintf("%q", x.Value)
	case *NumberLit:
		return x.Text
	case *BoolLit:
		return fmt.Sprint(x.Value)
	case *EmptyLit:
		return "EMPTY"
	case *VarRef:
		return "{" + x.Name + "}"
	case *Ident:
		return x.Name
	case *PayloadExpr:
		if x.Bytes {
			return "PAYLOAD-BYTES"
		}
		return "PAYLOAD"
	case *TopicPositionExpr:
		return "(POS " + sexpr(x.Index) + ")"
	case *GetTopicExpr:
		return "(GET-TOPIC " + sexpr(x.Topic) + ")"
	case *GetJSONExpr:
		return "(GET-JSON " + sexpr(x.Path) + " " + sexpr(x.Source) + ")"
	case *GetEnvExpr:
		return fmt.Sprintf("(GET-ENV %v %s)", x.Secret, sexpr(x.Name))
	case *TimestampExpr:
		return "(TIMESTAMP " + sexpr(x.Format) + ")"
	case *RandomExpr:
		return fmt.Sprintf("(RANDOM %d %s %s)", x.Kind, sexpr(x.Min), sexpr(x.Max))
	case *ReplaceExpr:
		return "(REPLACE " + sexpr(x.Find) + " " + sexpr(x.With) + " " + sexpr(x.Source) + ")"
	case *FilterExpr:
		return "(FILTER " + sexpr(x.Source) + " " + sexpr(x.Regex) + ")"
	case *TrimExpr:
		return "(TRIM " + sexpr(x.Source) + ")"
	case *SessionExpr:
		return x.Name
	case *CastExpr:
		return "(AS " + sexpr(x.X) + " " + string(x.Type) + ")"
	case *UnaryExpr:
		return "(" + x.Op.String() + " " + sexpr(x.X) + ")"
	case *BinaryExpr:
		return "(" + x.Op.String() + " " + sexpr(x.X) + " " + sexpr(x.Y) + ")"
	case *CondExpr:
		return "(IF " + sexpr(x.Cond) + " " + sexpr(x.Then) + " " + sexpr(x.Else) + ")"
	case *ObjectLit:
		var parts []string
		for _, f := range x.Fields {
			parts = append(parts, f.Key+":"+sexpr(f.Value))
		}
		return "{" + strings.Join(parts, " ") + "}"
	case *ArrayLit:
		var parts []string
		for _, el := range x.Elems {
			parts = append(parts, sexpr(el))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case *RuleTest:
		return "(" + x.Subject + " " + x.Op + " " + sexpr(x.Topic) + " " + sexpr(x.Arg) + ")"
	case *UnsupportedExpr:
		return "(UNSUPPORTED " + x.Feature + ")"
	}
	return fmt.Sprintf("?%T", e)
}

// mustParse parses src and fails the test on a syntax error.
func mustParse(t *testing.T, src string) *File {
	t.Helper()
	f, err := Parse("t.lot", src)
	if err != nil {
		t.Fatalf("parse %q:\n%s", src, err.(ErrorList).Format())
	}
	return f
}

func TestExpressions(t *testing.T) {
	tests := []struct{ src, want string }{
		{`1 + 2 * 3`, `(+ 1 (* 2 3))`},
		{`(1 + 2) * 3`, `(* (+ 1 2) 3)`},
		{`10 - 4 - 3`, `(- (- 10 4) 3)`},
		{`7 % 3 / 2`, `(/ (% 7 3) 2)`},
		{`-3 + -{x}`, `(+ -3 (- {x}))`},
		{`PAYLOAD + 1`, `(+ PAYLOAD 1)`},
		{`"T=" + PAYLOAD`, `(+ "T=" PAYLOAD)`},
		{`{a} > 1 AND {b} < 2 OR NOT {c} == 3`, `(OR (AND (> {a} 1) (< {b} 2)) (NOT (== {c} 3)))`},
		{`{a} = 1`, `(== {a} 1)`},
		{`{a} EQUALS EMPTY`, `(== {a} EMPTY)`},
		{`{a} != 1`, `(!= {a} 1)`},
		{`{a} <> 1`, `(!= {a} 1)`},
		{`{a} <= 1 AND {a} >= 0`, `(AND (<= {a} 1) (>= {a} 0))`},
		{`PAYLOAD CONTAINS "x" OR PAYLOAD STARTS_WITH "a" OR PAYLOAD ENDS_WITH "z"`,
			`(OR (OR (CONTAINS PAYLOAD "x") (STARTS_WITH PAYLOAD "a")) (ENDS_WITH PAYLOAD "z"))`},
		{`PAYLOAD AS DOUBLE > 80`, `(> (AS PAYLOAD DOUBLE) 80)`},
		{`payload as double`, `(AS PAYLOAD DOUBLE)`},
		{`PAYLOAD AS BYTES`, `PAYLOAD-BYTES`},
		{`GET TOPIC "a" AS DOUBLE / GET TOPIC "b" AS DOUBLE * 100`,
			`(* (/ (AS (GET-TOPIC "a") DOUBLE) (AS (GET-TOPIC "b") DOUBLE)) 100)`},
		{`GET TOPIC "count" + 1`, `(+ (GET-TOPIC "count") 1)`},
		{`GET TOPIC "a/" + {x}`, `(GET-TOPIC (+ "a/" {x}))`},
		{`GET TOPIC "a/" + {x} + "/b" + 1`, `(+ (GET-TOPIC (+ (+ "a/" {x}) "/b")) 1)`},
		{`GET TOPIC ("a" + {x})`, `(GET-TOPIC (+ "a" {x}))`},
		{`GET TOPIC {t}`, `(GET-TOPIC {t})`},
		{`GET JSON "data.temp" IN PAYLOAD AS DOUBLE`, `(AS (GET-JSON "data.temp" PAYLOAD) DOUBLE)`},
		{`GET JSON "x" IN {j}`, `(GET-JSON "x" {j})`},
		{`GET ENV "HOME"`, `(GET-ENV false "HOME")`},
		{`GET SECRET "PW"`, `(GET-ENV true "PW")`},
		{`TOPIC POSITION 2`, `(POS 2)`},
		{`"alerts/" + TOPIC POSITION 2`, `(+ "alerts/" (POS 2))`},
		{`TIMESTAMP "UTC"`, `(TIMESTAMP "UTC")`},
		{`TIMESTAMP WITH "yyyy-MM-dd"`, `(TIMESTAMP "yyyy-MM-dd")`},
		{`TIMESTAMP`, `(TIMESTAMP nil)`},
		{`RANDOM UUID`, `(RANDOM 1 nil nil)`},
		{`RANDOM INT BETWEEN 1 AND 6`, `(RANDOM 2 1 6)`},
		{`RANDOM DOUBLE BETWEEN 0 AND {max} * 2`, `(RANDOM 3 0 (* {max} 2))`},
		{`REPLACE "xx" WITH PAYLOAD IN "Machine xx"`, `(REPLACE "xx" PAYLOAD "Machine xx")`},
		{`FILTER PAYLOAD USING REGEX "[0-9]+"`, `(FILTER PAYLOAD "[0-9]+")`},
		{`PAYLOAD AND_THEN FILTER USING REGEX "[0-9]+" AND_THEN TRIM`, `(TRIM (FILTER PAYLOAD "[0-9]+"))`},
		{`PAYLOAD AND_THEN REPLACE "a" WITH "b"`, `(REPLACE "a" "b" PAYLOAD)`},
		{`TRIM PAYLOAD`, `(TRIM PAYLOAD)`},
		{`IF {a} > 1 THEN "big" ELSE "small"`, `(IF (> {a} 1) "big" "small")`},
		{`IF {a} > 1 THEN "a" ELSE IF {a} > 0 THEN "b" ELSE "c"`, `(IF (> {a} 1) "a" (IF (> {a} 0) "b" "c"))`},
		{`{ "k": {v}, "n": 1, "o": {"p": [1, "x"]} }`, `{k:{v} n:1 o:{p:[1 "x"]}}`},
		{`[]`, `[]`},
		{`TRUE AND false`, `(AND true false)`},
		{`CLIENTID + "/" + USER`, `(+ (+ CLIENTID "/") USER)`},
		{`total_energy * energy_price`, `(* total_energy energy_price)`},
		{`GET MODEL "M" FROM "db" WHERE id EQUALS 1`, `(UNSUPPORTED GET MODEL)`},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			f := mustParse(t, "DEFINE ACTION X ON TOPIC \"a\" DO SET \"v\" WITH "+tt.src)
			got := sexpr(f.Defs[0].(*Action).Body[0].(*SetStmt).Value)
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
