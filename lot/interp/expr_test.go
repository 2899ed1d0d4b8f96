package interp

import (
	"errors"
	"regexp"
	"testing"
)

// evalCase evaluates one expression in an action run by a message.
type evalCase struct {
	name     string
	expr     string
	payload  string
	topic    string            // default "sensors/s7/temperature"
	topics   map[string]string // GET TOPIC values
	vars     string            // SET lines run before the expression
	want     string            // the value's text
	kind     Kind              // checked unless wantErr is set
	wantErr  error
	wantLike string // a regular expression the text must match instead of want
}

// eval compiles `SET "result" WITH <expr>` in an ON TOPIC action and runs
// it, returning the variable.
func eval(t *testing.T, c evalCase) (Value, error) {
	t.Helper()
	src := "DEFINE ACTION T\nON TOPIC \"#\" DO\n" + c.vars + "    SET \"result\" WITH " + c.expr + "\n"
	a := actionOf(t, src)
	p, err := Compile(a, testOptions())
	if err != nil {
		t.Fatalf("compile %q: %v", c.expr, err)
	}
	rec := newRecorder()
	for k, v := range c.topics {
		rec.values[k] = []byte(v)
	}
	rec.env["env:SITE"], rec.env["secret:PW"] = "plant-7", "s3cret"
	topic := c.topic
	if topic == "" {
		topic = "sensors/s7/temperature"
	}
	ev := &Event{Topic: topic, Payload: []byte(c.payload), Session: Session{ClientID: "gw1", User: "op",
		CleanSession: true, SubscribeTopic: "a/#", SubscribeQoS: 1}}
	r := p.newRun(&Host{Effects: rec, Topics: rec, Env: rec}, ev)
	defer r.release()
	err = r.exec(p.body)
	return r.vars[p.slotOf(t, "result")], err
}

func (p *Program) slotOf(t *testing.T, name string) int {
	t.Helper()
	c := &compiler{opts: &p.opts, slots: map[string]int{}}
	for _, in := range p.inputs {
		c.slot(in.name)
	}
	c.block(p.action.Body)
	s, ok := c.slots[name]
	if !ok {
		t.Fatalf("no variable %s", name)
	}
	return s
}

func runEvalCases(t *testing.T, cases []evalCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := eval(t, c)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("%s: error %v, want %v", c.expr, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", c.expr, err)
			}
			if c.wantLike != "" {
				if !regexp.MustCompile(c.wantLike).MatchString(v.Text()) {
					t.Errorf("%s = %q, want match of %s", c.expr, v.Text(), c.wantLike)
				}
			} else if v.Text() != c.want {
				t.Errorf("%s = %q, want %q", c.expr, v.Text(), c.want)
			}
			if v.Kind() != c.kind {
				t.Errorf("%s: kind %v, want %v", c.expr, v.Kind(), c.kind)
			}
		})
	}
}

func TestLiteralsAndArithmetic(t *testing.T) {
	runEvalCases(t, []evalCase{
		{name: "string", expr: `"a b"`, want: "a b", kind: KindString},
		{name: "int", expr: `42`, want: "42", kind: KindInt},
		{name: "float", expr: `2.5`, want: "2.5", kind: KindFloat},
		{name: "negative", expr: `-3`, want: "-3", kind: KindInt},
		{name: "exponent", expr: `1e3`, want: "1000", kind: KindFloat},
		{name: "bool", expr: `TRUE`, want: "true", kind: KindBool},
		{name: "lower case bool", expr: `false`, want: "false", kind: KindBool},
		{name: "empty", expr: `EMPTY`, want: "", kind: KindEmpty},
		{name: "unset variable", expr: `{nothing}`, want: "", kind: KindEmpty},
		{name: "add ints", expr: `1 + 2`, want: "3", kind: KindInt},
		{name: "precedence", expr: `1 + 2 * 3`, want: "7", kind: KindInt},
		{name: "parentheses", expr: `(1 + 2) * 3`, want: "9", kind: KindInt},
		{name: "left associative", expr: `10 - 4 - 3`, want: "3", kind: KindInt},
		{name: "division is exact", expr: `7 / 2`, want: "3.5", kind: KindFloat},
		{name: "whole division", expr: `10 / 2`, want: "5", kind: KindFloat},
		{name: "modulo", expr: `7 % 3`, want: "1", kind: KindInt},
		{name: "float modulo", expr: `7.5 % 2`, want: "1.5", kind: KindFloat},
		{name: "mixed", expr: `2 * 3.5`, want: "7", kind: KindFloat},
		{name: "unary minus", expr: `-(2 + 3)`, want: "-5", kind: KindInt},
		{name: "overflow to float", expr: `9223372036854775807 + 1`, want: "9223372036854776000", kind: KindFloat},
		{name: "payload plus one", expr: `PAYLOAD + 1`, payload: "10", want: "11", kind: KindInt},
		{name: "float payload", expr: `PAYLOAD + 1`, payload: "2.5", want: "3.5", kind: KindFloat},
		{name: "payload with spaces", expr: `PAYLOAD * 2`, payload: " 7\n", want: "14", kind: KindInt},
		{name: "concat", expr: `"T=" + PAYLOAD`, payload: "21.5", want: "T=21.5", kind: KindString},
		{name: "concat keeps text", expr: `"id-" + PAYLOAD`, payload: "07", want: "id-07", kind: KindString},
		{name: "numeric strings add", expr: `"1" + "2"`, want: "3", kind: KindInt},
		{name: "concat float", expr: `"hot " + 31.5`, want: "hot 31.5", kind: KindString},
		{name: "concat bool", expr: `"on=" + TRUE`, want: "on=true", kind: KindString},
		{name: "empty counts as zero", expr: `GET TOPIC "count" + 1`, want: "1", kind: KindInt},
		{name: "empty minus", expr: `EMPTY - 2`, want: "-2", kind: KindInt},
		{name: "empty concat", expr: `EMPTY + "x"`, want: "x", kind: KindString},
		{name: "counter", expr: `GET TOPIC "count" + 1`, topics: map[string]string{"count": "41"}, want: "42", kind: KindInt},
		{name: "not a number", expr: `"abc" * 2`, wantErr: ErrNotNumber},
		{name: "bool is not a number", expr: `TRUE - 1`, wantErr: ErrNotNumber},
		{name: "division by zero", expr: `1 / 0`, wantErr: ErrDivisionByZero},
		{name: "division by empty", expr: `1 / EMPTY`, wantErr: ErrDivisionByZero},
		{name: "modulo by zero", expr: `5 % 0`, wantErr: ErrDivisionByZero},
		{name: "out of range", expr: `1e308 * 10`, wantErr: ErrNumberRange},
		{name: "negate text", expr: `-PAYLOAD`, payload: "abc", wantErr: ErrNotNumber},
		{name: "bytes in concat", expr: `"x" + PAYLOAD AS BYTES`, payload: "a", wantErr: ErrCast},
	})
}

func TestComparisonAndLogic(t *testing.T) {
	runEvalCases(t, []evalCase{
		{name: "payload greater", expr: `PAYLOAD > 30`, payload: "31.5", want: "true", kind: KindBool},
		{name: "numeric text order", expr: `"10" > "9"`, want: "true", kind: KindBool},
		{name: "text order", expr: `"abc" < "abd"`, want: "true", kind: KindBool},
		{name: "equal text", expr: `PAYLOAD == "ON"`, payload: "ON", want: "true", kind: KindBool},
		{name: "single equals", expr: `1 = 1`, want: "true", kind: KindBool},
		{name: "EQUALS", expr: `PAYLOAD EQUALS "x"`, payload: "x", want: "true", kind: KindBool},
		{name: "int equals float", expr: `1 == 1.0`, want: "true", kind: KindBool},
		{name: "numeric text equals", expr: `PAYLOAD == 5`, payload: "5.0", want: "true", kind: KindBool},
		{name: "not equal", expr: `PAYLOAD != "a"`, payload: "b", want: "true", kind: KindBool},
		{name: "bool equals text", expr: `TRUE == "true"`, want: "true", kind: KindBool},
		{name: "bool equals one", expr: `PAYLOAD == TRUE`, payload: "1", want: "true", kind: KindBool},
		{name: "never written is EMPTY", expr: `GET TOPIC "none" == EMPTY`, want: "true", kind: KindBool},
		{name: "zero is not EMPTY", expr: `GET TOPIC "zero" == EMPTY`, topics: map[string]string{"zero": "0"}, want: "false", kind: KindBool},
		{name: "empty text is EMPTY", expr: `"" == EMPTY`, want: "true", kind: KindBool},
		{name: "null is EMPTY", expr: `GET JSON "x" IN "{}" == EMPTY`, want: "true", kind: KindBool},
		{name: "null is text null", expr: `GET JSON "x" IN "{}" == "null"`, want: "true", kind: KindBool},
		{name: "EMPTY orders as zero", expr: `EMPTY < 1`, want: "true", kind: KindBool},
		{name: "less or equal", expr: `2 <= 2`, want: "true", kind: KindBool},
		{name: "greater or equal", expr: `1 >= 2`, want: "false", kind: KindBool},
		{name: "contains", expr: `"hello world" CONTAINS "lo w"`, want: "true", kind: KindBool},
		{name: "starts with", expr: `PAYLOAD STARTS_WITH "ERR"`, payload: "ERR42", want: "true", kind: KindBool},
		{name: "ends with", expr: `PAYLOAD ENDS_WITH ".json"`, payload: "a.txt", want: "false", kind: KindBool},
		{name: "and", expr: `TRUE AND FALSE`, want: "false", kind: KindBool},
		{name: "or", expr: `FALSE OR 1`, want: "true", kind: KindBool},
		{name: "not", expr: `NOT PAYLOAD`, payload: "false", want: "true", kind: KindBool},
		{name: "not binds looser than comparison", expr: `NOT 1 > 2`, want: "true", kind: KindBool},
		{name: "and before or", expr: `TRUE OR FALSE AND FALSE`, want: "true", kind: KindBool},
		{name: "and short circuit", expr: `FALSE AND (1 / 0)`, want: "false", kind: KindBool},
		{name: "or short circuit", expr: `TRUE OR (1 / 0)`, want: "true", kind: KindBool},
		{name: "conditional", expr: `IF PAYLOAD > 5 THEN "big" ELSE "small"`, payload: "3", want: "small", kind: KindString},
		{name: "chained conditional", expr: `IF 1 > 2 THEN "a" ELSE IF 2 > 1 THEN "b" ELSE "c"`, want: "b", kind: KindString},
		{name: "conditional is lazy", expr: `IF TRUE THEN 1 ELSE 1 / 0`, want: "1", kind: KindInt},
	})
}

func TestTruthy(t *testing.T) {
	cases := []struct {
		name string
		v    Value
		want bool
	}{
		{"empty", Value{}, false},
		{"null", Null(), false},
		{"false", Bool(false), false},
		{"zero", Int(0), false},
		{"float zero", Float(0), false},
		{"empty text", String(""), false},
		{"text false", String("FALSE"), false},
		{"text zero", String("0.0"), false},
		{"text", String("on"), true},
		{"text true", String("true"), true},
		{"number", Float(0.1), true},
		{"json", Value{kind: KindJSON, s: "{}"}, true},
	}
	for _, c := range cases {
		if got := Truthy(c.v); got != c.want {
			t.Errorf("%s: Truthy(%v) = %v", c.name, c.v, got)
		}
	}
}

func TestCasts(t *testing.T) {
	runEvalCases(t, []evalCase{
		{name: "text to int", expr: `"42" AS INT`, want: "42", kind: KindInt},
		{name: "int truncates", expr: `"3.9" AS INT`, want: "3", kind: KindInt},
		{name: "int truncates toward zero", expr: `-3.9 AS INT`, want: "-3", kind: KindInt},
		{name: "bool to int", expr: `TRUE AS INT`, want: "1", kind: KindInt},
		{name: "empty to int", expr: `EMPTY AS INT`, want: "0", kind: KindInt},
		{name: "bad int", expr: `"abc" AS INT`, wantErr: ErrCast},
		{name: "int out of range", expr: `"1e30" AS INT`, wantErr: ErrNumberRange},
		{name: "text to double", expr: `PAYLOAD AS DOUBLE`, payload: "2.5", want: "2.5", kind: KindFloat},
		{name: "int to double", expr: `3 AS DOUBLE`, want: "3", kind: KindFloat},
		{name: "empty to double", expr: `PAYLOAD AS DOUBLE`, want: "0", kind: KindFloat},
		{name: "bad double", expr: `PAYLOAD AS DOUBLE`, payload: "n/a", wantErr: ErrCast},
		{name: "number to string", expr: `42 AS STRING`, want: "42", kind: KindString},
		{name: "empty to string", expr: `EMPTY AS STRING`, want: "", kind: KindString},
		{name: "text to bool", expr: `"True" AS BOOL`, want: "true", kind: KindBool},
		{name: "zero to bool", expr: `0 AS BOOL`, want: "false", kind: KindBool},
		{name: "numeric text to bool", expr: `"1" AS BOOL`, want: "true", kind: KindBool},
		{name: "bad bool", expr: `"maybe" AS BOOL`, wantErr: ErrCast},
		{name: "object", expr: `PAYLOAD AS OBJECT`, payload: ` {"a": 1} `, want: `{"a": 1}`, kind: KindJSON},
		{name: "array is not object", expr: `"[1,2]" AS OBJECT`, wantErr: ErrCast},
		{name: "array", expr: `"[1,2]" AS ARRAY`, want: "[1,2]", kind: KindJSON},
		{name: "json scalar", expr: `"42" AS JSON`, want: "42", kind: KindInt},
		{name: "json string", expr: `PAYLOAD AS JSON`, payload: `"a\nb"`, want: "a\nb", kind: KindString},
		{name: "bad json", expr: `"{bad" AS JSON`, wantErr: ErrBadJSON},
		{name: "epoch to timestamp", expr: `1700000000 AS TIMESTAMP`, want: "2023-11-14T22:13:20.000Z", kind: KindString},
		{name: "text to timestamp", expr: `"2025-03-17 14:25:30" AS TIMESTAMP`, want: "2025-03-17T14:25:30.000Z", kind: KindString},
		{name: "bad timestamp", expr: `"yesterday" AS TIMESTAMP`, wantErr: ErrCast},
		{name: "cast chain", expr: `PAYLOAD AS DOUBLE AS INT AS STRING`, payload: "7.9", want: "7", kind: KindString},
	})
}

func TestDataSources(t *testing.T) {
	doc := `{"data":{"temp":31.5,"ok":true},"items":[{"n":1},{"n":"two"}],"s":"a\"b\u00e9\ud83d\ude00","nil":null}`
	runEvalCases(t, []evalCase{
		{name: "get json", expr: `GET JSON "data.temp" IN PAYLOAD`, payload: doc, want: "31.5", kind: KindFloat},
		{name: "get json cast", expr: `GET JSON "data.temp" IN PAYLOAD AS INT`, payload: doc, want: "31", kind: KindInt},
		{name: "get json bool", expr: `GET JSON "data.ok" IN PAYLOAD`, payload: doc, want: "true", kind: KindBool},
		{name: "get json object", expr: `GET JSON "data" IN PAYLOAD`, payload: doc, want: `{"temp":31.5,"ok":true}`, kind: KindJSON},
		{name: "get json index", expr: `GET JSON "items[1].n" IN PAYLOAD`, payload: doc, want: "two", kind: KindString},
		{name: "get json dotted index", expr: `GET JSON "items.0.n" IN PAYLOAD`, payload: doc, want: "1", kind: KindInt},
		{name: "get json escapes", expr: `GET JSON "s" IN PAYLOAD`, payload: doc, want: "a\"b\u00e9\U0001F600", kind: KindString},
		{name: "get json null", expr: `GET JSON "nil" IN PAYLOAD`, payload: doc, want: "null", kind: KindNull},
		{name: "missing key", expr: `GET JSON "data.pressure" IN PAYLOAD`, payload: doc, want: "null", kind: KindNull},
		{name: "missing as double", expr: `GET JSON "x" IN PAYLOAD AS DOUBLE`, payload: doc, want: "0", kind: KindFloat},
		{name: "missing as bool", expr: `GET JSON "x" IN PAYLOAD AS BOOL`, payload: doc, want: "false", kind: KindBool},
		{name: "missing as string", expr: `GET JSON "x" IN PAYLOAD AS STRING`, payload: doc, want: "null", kind: KindString},
		{name: "through a scalar", expr: `GET JSON "data.temp.x" IN PAYLOAD`, payload: doc, want: "null", kind: KindNull},
		{name: "index out of range", expr: `GET JSON "items.5" IN PAYLOAD`, payload: doc, want: "null", kind: KindNull},
		{name: "whole document", expr: `GET JSON "" IN PAYLOAD`, payload: "[1, 2]", want: "[1, 2]", kind: KindJSON},
		{name: "in empty", expr: `GET JSON "a" IN GET TOPIC "none"`, want: "null", kind: KindNull},
		{name: "in a variable", vars: "    SET \"o\" WITH {\"k\": PAYLOAD}\n", expr: `GET JSON "k" IN {o}`, payload: "v", want: "v", kind: KindString},
		{name: "duplicate keys last wins", expr: `GET JSON "a" IN PAYLOAD`, payload: `{"a":1,"a":2}`, want: "2", kind: KindInt},
		{name: "not json", expr: `GET JSON "a" IN PAYLOAD`, payload: "abc", wantErr: ErrBadJSON},
		{name: "truncated json", expr: `GET JSON "a" IN PAYLOAD`, payload: `{"a":1`, wantErr: ErrBadJSON},
		{name: "computed path", vars: "    SET \"p\" WITH \"data\"\n", expr: `GET JSON ({p} + ".temp") IN PAYLOAD`, payload: doc, want: "31.5", kind: KindFloat},
		{name: "get topic", expr: `GET TOPIC "a/b"`, topics: map[string]string{"a/b": "x"}, want: "x", kind: KindString},
		{name: "get topic concatenated", vars: "    SET \"id\" WITH \"b\"\n", expr: `GET TOPIC "a/" + {id}`, topics: map[string]string{"a/b": "y"}, want: "y", kind: KindString},
		{name: "get topic empty payload", expr: `GET TOPIC "a"`, topics: map[string]string{"a": ""}, want: "", kind: KindEmpty},
		{name: "topic position 1", expr: `TOPIC POSITION 1`, want: "sensors", kind: KindString},
		{name: "topic position 2", expr: `TOPIC POSITION 2`, want: "s7", kind: KindString},
		{name: "topic position last", expr: `TOPIC POSITION 3`, want: "temperature", kind: KindString},
		{name: "topic position past the end", expr: `TOPIC POSITION 4`, want: "", kind: KindEmpty},
		{name: "topic position computed", vars: "    SET \"n\" WITH 1 + 1\n", expr: `TOPIC POSITION {n}`, want: "s7", kind: KindString},
		{name: "topic position zero", vars: "    SET \"n\" WITH 0\n", expr: `TOPIC POSITION {n}`, wantErr: ErrTopic},
		{name: "topic position in concat", expr: `"alerts/" + TOPIC POSITION 2`, want: "alerts/s7", kind: KindString},
		{name: "env", expr: `GET ENV "SITE"`, want: "plant-7", kind: KindString},
		{name: "missing env", expr: `GET ENV "NOPE"`, want: "", kind: KindEmpty},
		{name: "secret", expr: `GET SECRET "PW"`, want: "s3cret", kind: KindString},
		{name: "client id", expr: `CLIENTID`, want: "gw1", kind: KindString},
		{name: "user", expr: `USER`, want: "op", kind: KindString},
		{name: "clean session", expr: `CLEANSESSION`, want: "true", kind: KindBool},
		{name: "subscribe qos", expr: `SUBSCRIBEQOS`, want: "1", kind: KindInt},
		{name: "disconnect reason unset", expr: `DISCONNECTREASON`, want: "", kind: KindEmpty},
		{name: "payload as bytes", expr: `PAYLOAD AS BYTES`, payload: "\x00\xff", want: "\x00\xff", kind: KindBytes},
		{name: "object literal", expr: `{"a": 1, "b": PAYLOAD, "c": {"d": TRUE}, "e": [1, "x", EMPTY], "f": 2.50}`, payload: "21.5",
			want: `{"a":1,"b":"21.5","c":{"d":true},"e":[1,"x",null],"f":2.5}`, kind: KindJSON},
		{name: "object literal escapes", expr: `{"q": PAYLOAD}`, payload: "say \"hi\"\n\x01", want: `{"q":"say \"hi\"\n\u0001"}`, kind: KindJSON},
	})
}

func TestTransforms(t *testing.T) {
	runEvalCases(t, []evalCase{
		{name: "replace", expr: `REPLACE "xx" WITH PAYLOAD IN "Machine xx was selected"`, payload: "12", want: "Machine 12 was selected", kind: KindString},
		{name: "replace every", expr: `REPLACE "a" WITH "o" IN "banana"`, want: "bonono", kind: KindString},
		{name: "replace nothing", expr: `REPLACE "" WITH "x" IN "abc"`, want: "abc", kind: KindString},
		{name: "replace in topic value", expr: `REPLACE "id" WITH TOPIC POSITION 2 IN "sensor/id/status"`, want: "sensor/s7/status", kind: KindString},
		{name: "replace chained", expr: `PAYLOAD AND_THEN REPLACE "," WITH "."`, payload: "3,14", want: "3.14", kind: KindString},
		{name: "filter", expr: `FILTER PAYLOAD USING REGEX "[0-9]+"`, payload: "abc123def45", want: "123", kind: KindString},
		{name: "filter chained", expr: `PAYLOAD AND_THEN FILTER USING REGEX "[0-9. ]+" AND_THEN TRIM`, payload: "T: 21.5 C", want: "21.5", kind: KindString},
		{name: "filter no match", expr: `FILTER PAYLOAD USING REGEX "[0-9]+"`, payload: "none", want: "", kind: KindEmpty},
		{name: "filter default source", expr: `FILTER USING REGEX "[a-z]+"`, payload: "42abc", want: "abc", kind: KindString},
		{name: "filter computed regex", vars: "    SET \"re\" WITH \"b+\"\n", expr: `FILTER PAYLOAD USING REGEX {re}`, payload: "abbbc", want: "bbb", kind: KindString},
		{name: "filter bad computed regex", vars: "    SET \"re\" WITH \"(\"\n", expr: `FILTER PAYLOAD USING REGEX {re}`, payload: "x", wantErr: ErrCompile},
		{name: "trim", expr: `TRIM PAYLOAD`, payload: "  a b \n", want: "a b", kind: KindString},
		{name: "timestamp iso", expr: `TIMESTAMP "ISO"`, want: "2025-03-17T14:25:30.123Z", kind: KindString},
		{name: "timestamp bare", expr: `TIMESTAMP`, want: "2025-03-17T14:25:30.123Z", kind: KindString},
		{name: "timestamp utc", expr: `TIMESTAMP "UTC"`, want: "2025-03-17 14:25:30", kind: KindString},
		{name: "timestamp with", expr: `TIMESTAMP WITH "utc"`, want: "2025-03-17 14:25:30", kind: KindString},
		{name: "timestamp unix", expr: `TIMESTAMP "UNIX"`, want: "1742221530", kind: KindInt},
		{name: "timestamp unix ms", expr: `TIMESTAMP "UNIX-MS"`, want: "1742221530123", kind: KindInt},
		{name: "timestamp pattern", expr: `TIMESTAMP "yyyy/MM/dd HH:mm:ss.fff"`, want: "2025/03/17 14:25:30.123", kind: KindString},
		{name: "timestamp names", expr: `TIMESTAMP "dddd, MMMM d, yy"`, want: "Monday, March 17, 25", kind: KindString},
		{name: "timestamp short names", expr: `TIMESTAMP "ddd MMM"`, want: "Mon Mar", kind: KindString},
		{name: "timestamp 12 hours", expr: `TIMESTAMP "hh:mm tt"`, want: "02:25 PM", kind: KindString},
		{name: "timestamp literals", expr: `TIMESTAMP "'at' HH\\h yyyy-MM-ddTHH"`, want: "at 14h 2025-03-17T14", kind: KindString},
		{name: "timestamp zone", expr: `TIMESTAMP "HH:mm zzz K"`, want: "14:25 +00:00 Z", kind: KindString},
		{name: "timestamp trimmed fraction", expr: `TIMESTAMP "ss.FFFF"`, want: "30.123", kind: KindString},
		{name: "timestamp bad pattern", expr: `TIMESTAMP "'open"`, want: "", kind: KindString},
		{name: "timestamp too many f", expr: `TIMESTAMP "ffffffff"`, want: "", kind: KindString},
		{name: "timestamp computed", vars: "    SET \"f\" WITH \"UNIX\"\n", expr: `TIMESTAMP {f}`, want: "1742221530", kind: KindInt},
		{name: "uuid", expr: `RANDOM UUID`, wantLike: `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, kind: KindString},
		{name: "random int", expr: `RANDOM INT BETWEEN 5 AND 7`, wantLike: `^[567]$`, kind: KindInt},
		{name: "random int swapped bounds", expr: `RANDOM INT BETWEEN 7 AND 5`, wantLike: `^[567]$`, kind: KindInt},
		{name: "random double", expr: `RANDOM DOUBLE BETWEEN 1 AND 2`, wantLike: `^1(\.[0-9]+)?$`, kind: KindFloat},
		{name: "random bad bound", expr: `RANDOM INT BETWEEN "a" AND 2`, wantErr: ErrCast},
	})
}
