package syntax

import "strings"

// Node is any element of the syntax tree. Pos is where the node starts
// in the source: the first token that belongs to it.
type Node interface {
	Pos() Pos
}

// File is one parsed LoT source: a sequence of definitions.
type File struct {
	Name string // the name given to Parse, used in error messages
	Src  string // the whole source text
	Defs []Def
}

// DefKind says what a definition defines.
type DefKind int

// The kinds of definition. Panels, themes, things and agents are parsed
// only far enough to be recognised (UnsupportedDef); the checker refuses
// them.
const (
	KindAction DefKind = iota + 1
	KindModel
	KindRule
	KindConnector // DEFINE CONNECTOR, or its older name DEFINE ROUTE
	KindPanel     // DEFINE PANEL, or DEFINE VISU
	KindTheme
	KindThing
	KindAgent
)

var defKindNames = map[DefKind]string{
	KindAction: "ACTION", KindModel: "MODEL", KindRule: "RULE",
	KindConnector: "CONNECTOR", KindPanel: "PANEL", KindTheme: "THEME",
	KindThing: "THING", KindAgent: "AGENT",
}

// String returns the keyword of the kind: "ACTION", "CONNECTOR", ...
func (k DefKind) String() string {
	if s, ok := defKindNames[k]; ok {
		return s
	}
	return "DefKind(?)"
}

// Def is a top-level definition: *Action, *Model, *Rule, *Connector or
// *UnsupportedDef. Header gives what every definition has.
type Def interface {
	Node
	Header() *DefHeader
}

// DefHeader is what every definition carries: its kind, its name and the
// exact source text, so that a runtime can store and republish the source
// of each definition on its own.
type DefHeader struct {
	Start   Pos     // the DEFINE keyword
	Kind    DefKind // what is defined
	Keyword string  // the kind as written, upper case: "ROUTE" for a DEFINE ROUTE
	Name    string  // the definition's name, unquoted
	NamePos Pos
	// Span covers the definition from DEFINE to the end of its last
	// non-blank line (comments after the body included, trailing blank
	// lines excluded); Text is that part of the source.
	Span Span
	Text string
}

// Header returns h itself; it makes every definition a Def.
func (h *DefHeader) Header() *DefHeader { return h }

// Pos returns the position of the DEFINE keyword.
func (h *DefHeader) Pos() Pos { return h.Start }

// ---------------------------------------------------------------- actions

// Action is DEFINE ACTION: either event-driven (Trigger set) or callable
// (Trigger nil, with optional Inputs and Outputs).
type Action struct {
	DefHeader
	Trigger     *Trigger  // nil for a callable action
	Inputs      []*Input  // INPUT lines of a callable
	Body        []Stmt    // the statements after DO
	Outputs     []*Output // OUTPUT lines under RETURN
	Description *StringLit
}

// TriggerKind says what starts an action.
type TriggerKind int

// The triggers of the reference, §4.1.
const (
	TriggerTopic      TriggerKind = iota + 1 // ON TOPIC <filter>
	TriggerChange                            // ON CHANGE <filter>
	TriggerEvery                             // ON EVERY n UNIT
	TriggerDaily                             // ON EVERY <day|WEEKDAY|WEEKEND> AT "HH:mm[:ss]"
	TriggerTimestamp                         // ON TIMESTAMP "HH:mm:ss" or "dd-MM-yyyy HH:mm:ss"
	TriggerStart                             // ON START
	TriggerConnect                           // ON CONNECT
	TriggerDisconnect                        // ON DISCONNECT
	TriggerSubscribe                         // ON SUBSCRIBE [filter]
)

var triggerNames = map[TriggerKind]string{
	TriggerTopic: "ON TOPIC", TriggerChange: "ON CHANGE", TriggerEvery: "ON EVERY",
	TriggerDaily: "ON EVERY ... AT", TriggerTimestamp: "ON TIMESTAMP",
	TriggerStart: "ON START", TriggerConnect: "ON CONNECT",
	TriggerDisconnect: "ON DISCONNECT", TriggerSubscribe: "ON SUBSCRIBE",
}

// String returns the trigger as written: "ON TOPIC", "ON EVERY", ...
func (k TriggerKind) String() string {
	if s, ok := triggerNames[k]; ok {
		return s
	}
	return "TriggerKind(?)"
}

// HasPayload reports whether actions with this trigger run on a message,
// so that PAYLOAD and TOPIC POSITION have a value.
func (k TriggerKind) HasPayload() bool { return k == TriggerTopic || k == TriggerChange }

// IsSession reports whether the trigger is a client session event
// (CLIENTID, USER, ... have a value).
func (k TriggerKind) IsSession() bool {
	return k == TriggerConnect || k == TriggerDisconnect || k == TriggerSubscribe
}

// Trigger is the ON clause of an action. Which fields are set depends on
// Kind:
//
//	TriggerTopic, TriggerChange: Topic (an expression, usually a *StringLit)
//	TriggerSubscribe:            Topic, or nil for every subscription
//	TriggerEvery:                Count, CountText, Unit
//	TriggerDaily:                Day, At
//	TriggerTimestamp:            At
type Trigger struct {
	Start     Pos
	Kind      TriggerKind
	Topic     Expr
	Count     float64 // ON EVERY n: n
	CountText string  // n as written
	CountPos  Pos
	Unit      TimeUnit
	UnitPos   Pos
	Day       string // MONDAY..SUNDAY, WEEKDAY or WEEKEND, upper case
	DayPos    Pos
	At        string // the time of TriggerDaily, the moment of TriggerTimestamp
	AtPos     Pos
}

// Pos returns the position of ON.
func (t *Trigger) Pos() Pos { return t.Start }

// TimeUnit is the unit of ON EVERY n UNIT and of a connector's WITH EVERY.
type TimeUnit int

// Time units; plural and singular spellings are the same unit.
const (
	UnitMillisecond TimeUnit = iota + 1
	UnitSecond
	UnitMinute
	UnitHour
	UnitDay
	UnitWeek
	UnitMonth
	UnitYear
)

var unitNames = map[TimeUnit]string{
	UnitMillisecond: "MILLISECONDS", UnitSecond: "SECONDS", UnitMinute: "MINUTES",
	UnitHour: "HOURS", UnitDay: "DAYS", UnitWeek: "WEEKS", UnitMonth: "MONTHS",
	UnitYear: "YEARS",
}

// String returns the plural keyword of the unit.
func (u TimeUnit) String() string {
	if s, ok := unitNames[u]; ok {
		return s
	}
	return "TimeUnit(?)"
}

// ParseTimeUnit reads a unit keyword in any case, singular or plural.
func ParseTimeUnit(word string) (TimeUnit, bool) {
	w := strings.ToUpper(word)
	for u, s := range unitNames {
		if w == s || w == s[:len(s)-1] {
			return u, true
		}
	}
	return 0, false
}

// Input is INPUT <name> AS <type> of a callable action.
type Input struct {
	Start   Pos
	Name    string
	NamePos Pos
	Type    TypeName
	TypePos Pos
}

// Pos returns the position of INPUT.
func (n *Input) Pos() Pos { return n.Start }

// Output is OUTPUT <name> under RETURN of a callable action.
type Output struct {
	Start   Pos
	Name    string
	NamePos Pos
}

// Pos returns the position of OUTPUT.
func (n *Output) Pos() Pos { return n.Start }

// TypeName is a LoT type keyword, upper case: STRING, INT, DOUBLE, BOOL,
// TIMESTAMP, JSON, OBJECT, ARRAY, BYTES. The empty TypeName is the dynamic
// type of an untyped model field.
type TypeName string

// The type keywords.
const (
	TypeDynamic   TypeName = ""
	TypeString    TypeName = "STRING"
	TypeInt       TypeName = "INT"
	TypeDouble    TypeName = "DOUBLE"
	TypeBool      TypeName = "BOOL"
	TypeTimestamp TypeName = "TIMESTAMP"
	TypeJSON      TypeName = "JSON"
	TypeObject    TypeName = "OBJECT"
	TypeArray     TypeName = "ARRAY"
	TypeBytes     TypeName = "BYTES"
)

// typeNames lists every TypeName that may be written.
var typeNames = []TypeName{TypeString, TypeInt, TypeDouble, TypeBool, TypeTimestamp,
	TypeJSON, TypeObject, TypeArray, TypeBytes}

// ParseTypeName reads a type keyword in any case.
func ParseTypeName(word string) (TypeName, bool) {
	w := TypeName(strings.ToUpper(word))
	for _, t := range typeNames {
		if w == t {
			return t, true
		}
	}
	return "", false
}

// -------------------------------------------------------------- statements

// Stmt is a statement of an action body: *SetStmt, *PublishStmt,
// *PublishModelStmt, *IfStmt, *SwitchStmt, *LoopStmt, *CallActionStmt,
// *TriggerEventStmt, *EnvStmt or *UnsupportedStmt.
type Stmt interface {
	Node
	stmtNode()
}

// SetStmt is SET "<name>" WITH <expr> (also TO, AS or = instead of WITH).
type SetStmt struct {
	Start   Pos
	Name    string
	NamePos Pos
	Value   Expr
}

// PublishStmt is PUBLISH TOPIC <topic> WITH <value>, or KEEP TOPIC when
// Keep is set (stored in the last-value cache, not delivered).
type PublishStmt struct {
	Start Pos
	Keep  bool
	Topic Expr
	Value Expr
}

// PublishModelStmt is PUBLISH MODEL <Model> TO <topic> WITH followed by
// one field assignment per indented line.
type PublishModelStmt struct {
	Start    Pos
	Model    string
	ModelPos Pos
	Topic    Expr
	Fields   []*Assign
}

// Assign is <name> = <expr>: a field of PUBLISH MODEL or an argument of
// CALL ACTION.
type Assign struct {
	Name    string
	NamePos Pos
	Value   Expr
}

// Pos returns the position of the name.
func (a *Assign) Pos() Pos { return a.NamePos }

// IfStmt is IF <cond> THEN <block> [ELSE <block>]. An ELSE IF chain is an
// Else holding exactly one *IfStmt with ElseIf set.
type IfStmt struct {
	Start  Pos
	Cond   Expr
	Then   []Stmt
	Else   []Stmt
	ElseIf bool // this IF was written as ELSE IF
}

// SwitchStmt is SWITCH <expr> with CASE <value> THEN blocks and an
// optional DEFAULT THEN block.
type SwitchStmt struct {
	Start      Pos
	Subject    Expr
	Cases      []*Case
	Default    []Stmt
	HasDefault bool
}

// Case is CASE <value>[, <value>...] THEN <block> of a SWITCH.
type Case struct {
	Start  Pos
	Values []Expr
	Body   []Stmt
}

// Pos returns the position of CASE.
func (c *Case) Pos() Pos { return c.Start }

// LoopStmt is LOOP <block> UNTIL <cond>: the body runs, then the loop
// ends when Until is true.
type LoopStmt struct {
	Start Pos
	Body  []Stmt
	Until Expr
}

// CallActionStmt is CALL ACTION <Name> [WITH a = <expr>, ...]
// [RETURN r1, r2]: Args bind the callee's INPUTs by name, Returns receive
// its OUTPUTs in declaration order.
type CallActionStmt struct {
	Start   Pos
	Name    string
	NamePos Pos
	Args    []*Assign
	Returns []*Ident
}

// TriggerEventStmt is TRIGGER "<Event>" TO <Connector> [WITH <expr>]: it
// fires an event of a connector.
type TriggerEventStmt struct {
	Start        Pos
	Event        Expr
	Connector    string
	ConnectorPos Pos
	Value        Expr // nil without WITH
}

// EnvStmt is KEEP ENV|SECRET "<name>" WITH <expr> or DELETE ENV|SECRET
// "<name>".
type EnvStmt struct {
	Start  Pos
	Secret bool
	Delete bool
	Name   Expr
	Value  Expr // nil for DELETE
}

// UnsupportedStmt is a statement Gantry recognises but does not run:
// CALL PYTHON, CALL LLM, CALL MCP, CALL AGENT. The checker refuses it.
// Text is the statement as written.
type UnsupportedStmt struct {
	Start   Pos
	Feature string // "CALL PYTHON", ...
	Text    string
}

func (s *SetStmt) Pos() Pos          { return s.Start }
func (s *PublishStmt) Pos() Pos      { return s.Start }
func (s *PublishModelStmt) Pos() Pos { return s.Start }
func (s *IfStmt) Pos() Pos           { return s.Start }
func (s *SwitchStmt) Pos() Pos       { return s.Start }
func (s *LoopStmt) Pos() Pos         { return s.Start }
func (s *CallActionStmt) Pos() Pos   { return s.Start }
func (s *TriggerEventStmt) Pos() Pos { return s.Start }
func (s *EnvStmt) Pos() Pos          { return s.Start }
func (s *UnsupportedStmt) Pos() Pos  { return s.Start }

func (*SetStmt) stmtNode()          {}
func (*PublishStmt) stmtNode()      {}
func (*PublishModelStmt) stmtNode() {}
func (*IfStmt) stmtNode()           {}
func (*SwitchStmt) stmtNode()       {}
func (*LoopStmt) stmtNode()         {}
func (*CallActionStmt) stmtNode()   {}
func (*TriggerEventStmt) stmtNode() {}
func (*EnvStmt) stmtNode()          {}
func (*UnsupportedStmt) stmtNode()  {}
