package syntax

import (
	"strings"
	"time"
)

// ------------------------------------------------------------------ models

// Model is DEFINE MODEL <Name> [COLLAPSED] [FROM <Parent>] [WITH TOPIC
// "<t>"] [KEEP|RETAIN|WITH RETAIN] [AND] [QOS0|QOS1|QOS2] [WITH FORMAT f]
// followed by indented field lines.
type Model struct {
	DefHeader
	Collapsed bool
	From      string // parent model, "" without FROM
	FromPos   Pos
	Topic     *StringLit // WITH TOPIC, nil when absent
	Retain    bool
	Keep      bool
	QoS       int    // 0 unless QOS1 or QOS2 is written
	Format    string // WITH FORMAT, upper case; "" when absent
	Fields    []*Field
	// Unsupported holds model lines Gantry recognises but refuses: STORE IN
	// and FETCH FROM, which need a database connector.
	Unsupported []*UnsupportedStmt
}

// Field is one ADD line of a model:
//
//	ADD [TYPE] "name" [WITH TOPIC "t" | WITH <expr>] [AS TRIGGER]
//	ADD COLLECTION "name" OF <Model>
//	ADD ARRAY "name" followed by indented item fields
type Field struct {
	Start      Pos
	Type       TypeName // TypeDynamic when untyped
	TypePos    Pos
	Name       string
	NamePos    Pos
	Topic      *StringLit // WITH TOPIC "t": the field holds that topic's last value
	Value      Expr       // WITH <expr>: literal or expression evaluated at publish time
	IsTrigger  bool       // AS TRIGGER
	TriggerPos Pos
	Collection bool   // ADD COLLECTION "name" OF <Of>
	Of         string // the item model of a collection
	OfPos      Pos
	Items      []*Field // the indented item fields of ADD ARRAY
}

// Pos returns the position of ADD.
func (f *Field) Pos() Pos { return f.Start }

// ------------------------------------------------------------------- rules

// Effect is what a rule decides.
type Effect int

// EffectNone is the absent ELSE of IF ... THEN ALLOW.
const (
	EffectNone Effect = iota
	Allow
	Deny
)

// String returns ALLOW, DENY or "".
func (e Effect) String() string {
	switch e {
	case Allow:
		return "ALLOW"
	case Deny:
		return "DENY"
	}
	return ""
}

// Rule is DEFINE RULE <Name> WITH PRIORITY n FOR <Scope> [TO TOPIC "<f>"]
// followed by ALLOW, DENY, or IF <cond> THEN ALLOW|DENY [ELSE ALLOW|DENY].
type Rule struct {
	DefHeader
	Priority    int
	PriorityPos Pos
	Scope       string // as written
	ScopePos    Pos
	Topic       *StringLit // TO TOPIC, nil when absent
	Cond        Expr       // nil for an unconditional rule
	Then        Effect     // the effect when Cond holds (or always without Cond)
	ThenPos     Pos
	Else        Effect // EffectNone when there is no ELSE
	ElsePos     Pos
}

// -------------------------------------------------------------- connectors

// Connector is DEFINE CONNECTOR <Name> WITH TYPE <T> (or the older DEFINE
// ROUTE) with its configuration as a generic tree: drivers read the blocks
// they know.
type Connector struct {
	DefHeader
	// Type is the canonical type (S7 becomes SIEMENS_S7); TypeWritten is
	// the type as written, upper case.
	Type        string
	TypeWritten string
	TypePos     Pos
	Pairs       []*ConfigPair // WITH lines directly under the header, if any
	Blocks      []*ConfigBlock
}

// Block returns the first top-level block of the kind (upper case), or
// nil.
func (c *Connector) Block(kind string) *ConfigBlock {
	for _, b := range c.Blocks {
		if b.Kind == kind {
			return b
		}
	}
	return nil
}

// ConfigBlock is an ADD line and what is indented under it:
//
//	ADD MODBUS_CONFIG            Kind MODBUS_CONFIG
//	ADD CONNECTOR_CONFIG         Kind CONNECTOR_CONFIG (also for ROUTE_CONFIG)
//	ADD MAPPING Poll             Kind MAPPING, Name Poll
//	ADD TAG Temperature          Kind TAG, Name Temperature
//	ADD EVENT AddPart            Kind EVENT, Name AddPart
//	STORE Files WITH ...         Kind STORE, Name Files
type ConfigBlock struct {
	Start   Pos
	Kind    string // upper case, aliases resolved
	Written string // the kind as written, upper case
	KindPos Pos
	Name    string // "" for unnamed blocks
	NamePos Pos
	Pairs   []*ConfigPair
	Blocks  []*ConfigBlock
}

// Pos returns the position of ADD (or STORE).
func (b *ConfigBlock) Pos() Pos { return b.Start }

// Pair returns the first pair with the key (upper case), or nil.
func (b *ConfigBlock) Pair(key string) *ConfigPair {
	for _, p := range b.Pairs {
		if p.Key == key {
			return p
		}
	}
	return nil
}

// Block returns the first nested block of the kind (upper case), or nil.
func (b *ConfigBlock) Block(kind string) *ConfigBlock {
	for _, c := range b.Blocks {
		if c.Kind == kind {
			return c
		}
	}
	return nil
}

// ConfigPair is WITH <KEY> <value...>. Most values are one item; some are
// several (WITH EVERY 500 MILLISECONDS is a number and a word).
type ConfigPair struct {
	Start  Pos // WITH
	Key    string
	KeyPos Pos
	Values []ConfigValue
	Raw    string // the value as written, from its first to its last character
}

// Pos returns the position of WITH.
func (p *ConfigPair) Pos() Pos { return p.Start }

// Value returns the first value item, or a zero ConfigValue when the pair
// has none.
func (p *ConfigPair) Value() ConfigValue {
	if len(p.Values) == 0 {
		return ConfigValue{}
	}
	return p.Values[0]
}

// Text returns the texts of the value items joined by single spaces:
// "500 MILLISECONDS", "192.168.1.100", "SELF".
func (p *ConfigPair) Text() string {
	parts := make([]string, len(p.Values))
	for i, v := range p.Values {
		parts[i] = v.Text
	}
	return strings.Join(parts, " ")
}

// Interval reads a value of the form <n> <unit> (WITH EVERY 1 SECONDS).
// ok is false when the value has another shape or the unit has no fixed
// length (months, years).
func (p *ConfigPair) Interval() (d time.Duration, ok bool) {
	if len(p.Values) != 2 || p.Values[0].Kind != ValueNumber || p.Values[1].Kind != ValueWord {
		return 0, false
	}
	u, ok := ParseTimeUnit(p.Values[1].Text)
	if !ok {
		return 0, false
	}
	return u.Duration(p.Values[0].Number)
}

// ValueKind says what a ConfigValue item is.
type ValueKind int

// The kinds of configuration value items.
const (
	ValueString ValueKind = iota + 1 // "text" or 'text' (Quote says which)
	ValueNumber                      // 502, 0.1, -3
	ValueBool                        // TRUE or FALSE, any case
	ValueWord                        // a bare word: SELF, MILLISECONDS, DB1.DBD0
	ValueEnv                         // GET ENV "NAME": Text is NAME
	ValueSecret                      // GET SECRET "NAME": Text is NAME
)

var valueKindNames = map[ValueKind]string{ValueString: "string", ValueNumber: "number",
	ValueBool: "bool", ValueWord: "word", ValueEnv: "env", ValueSecret: "secret"}

// String names the kind: "string", "number", ...
func (k ValueKind) String() string {
	if s, ok := valueKindNames[k]; ok {
		return s
	}
	return "ValueKind(?)"
}

// ConfigValue is one item of a configuration value.
type ConfigValue struct {
	Pos    Pos
	Kind   ValueKind
	Text   string  // unquoted string, number or word as written, env or secret name
	Quote  byte    // '"' or '\'' for ValueString
	Number float64 // for ValueNumber
	Bool   bool    // for ValueBool
}

// Duration returns n units as a duration. ok is false for months and
// years, whose length varies, and for durations that do not fit.
func (u TimeUnit) Duration(n float64) (d time.Duration, ok bool) {
	var unit time.Duration
	switch u {
	case UnitMillisecond:
		unit = time.Millisecond
	case UnitSecond:
		unit = time.Second
	case UnitMinute:
		unit = time.Minute
	case UnitHour:
		unit = time.Hour
	case UnitDay:
		unit = 24 * time.Hour
	case UnitWeek:
		unit = 7 * 24 * time.Hour
	default:
		return 0, false
	}
	f := n * float64(unit)
	if f != f || f > float64(1<<62) || f < -float64(1<<62) {
		return 0, false
	}
	return time.Duration(f), true
}

// Interval returns the period of an ON EVERY n UNIT trigger; ok is false
// for other triggers and for months and years.
func (t *Trigger) Interval() (time.Duration, bool) {
	if t.Kind != TriggerEvery {
		return 0, false
	}
	return t.Unit.Duration(t.Count)
}

// ----------------------------------------------------------- unsupported

// UnsupportedDef is a definition Gantry recognises but refuses: DEFINE
// PANEL (or VISU), THEME, THING, AGENT. Only its header is parsed; the
// indented body is skipped.
type UnsupportedDef struct {
	DefHeader
}
