package syntax

import "strings"

// Expr is an expression: a value computed when an action, a model field
// or a rule condition is evaluated.
type Expr interface {
	Node
	exprNode()
}

// StringLit is "text" or 'text'. Value has the quotes removed and the
// escapes \" \' \\ \n \t decoded; any other backslash is kept as written,
// so regular expressions like "\d+" need no doubling.
type StringLit struct {
	Start Pos
	Value string
	Quote byte // '"' or '\''
}

// NumberLit is 42, 2.5, -3 or 1e3. Text is the literal as written.
type NumberLit struct {
	Start Pos
	Text  string
	Value float64
}

// IsInt reports whether the literal was written without a fraction or an
// exponent.
func (n *NumberLit) IsInt() bool { return !strings.ContainsAny(n.Text, ".eE") }

// BoolLit is TRUE or FALSE, in any case.
type BoolLit struct {
	Start Pos
	Value bool
}

// EmptyLit is EMPTY, the value of a topic never written.
type EmptyLit struct {
	Start Pos
}

// VarRef is {name}: an action-local variable, an INPUT or a RETURN
// variable.
type VarRef struct {
	Start Pos
	Name  string
}

// Ident is a bare name used as a value: a model field in a model field
// expression, a permission flag after USER HAS, or (in an action) a word
// the checker does not know, most often a misspelt keyword.
type Ident struct {
	Start Pos
	Name  string
}

// PayloadExpr is PAYLOAD, the payload of the triggering message. Bytes
// is set for PAYLOAD AS BYTES, which is not a cast.
type PayloadExpr struct {
	Start Pos
	Bytes bool
}

// TopicPositionExpr is TOPIC POSITION n: level n (1-based) of the
// concrete topic that fired the action.
type TopicPositionExpr struct {
	Start Pos
	Index Expr
}

// GetTopicExpr is GET TOPIC <topic>: the last value known for a topic.
type GetTopicExpr struct {
	Start Pos
	Topic Expr
}

// GetJSONExpr is GET JSON <path> IN <source>: a dotted path into JSON.
type GetJSONExpr struct {
	Start  Pos
	Path   Expr
	Source Expr
}

// GetEnvExpr is GET ENV "NAME", or GET SECRET "NAME" when Secret is set.
type GetEnvExpr struct {
	Start  Pos
	Secret bool
	Name   Expr
}

// TimestampExpr is TIMESTAMP "<format>" (also TIMESTAMP WITH "<format>").
// Format is nil for a bare TIMESTAMP.
type TimestampExpr struct {
	Start  Pos
	Format Expr
}

// RandomKind says what RANDOM produces.
type RandomKind int

// RANDOM UUID, RANDOM INT BETWEEN a AND b, RANDOM DOUBLE BETWEEN a AND b.
const (
	RandomUUID RandomKind = iota + 1
	RandomInt
	RandomDouble
)

// RandomExpr is RANDOM UUID or RANDOM INT|DOUBLE BETWEEN Min AND Max.
type RandomExpr struct {
	Start Pos
	Kind  RandomKind
	Min   Expr
	Max   Expr
}

// ReplaceExpr is REPLACE <find> WITH <with> IN <source>. In an AND_THEN
// chain Source is the value before AND_THEN.
type ReplaceExpr struct {
	Start  Pos
	Find   Expr
	With   Expr
	Source Expr
}

// FilterExpr is FILTER <source> USING REGEX <regex>: the first match. In
// an AND_THEN chain Source is the value before AND_THEN.
type FilterExpr struct {
	Start  Pos
	Source Expr
	Regex  Expr
}

// TrimExpr is TRIM <source>, or AND_THEN TRIM in a chain.
type TrimExpr struct {
	Start  Pos
	Source Expr
}

// SessionExpr is a session keyword of a session-triggered action:
// CLIENTID, USER, ENDPOINT, CLEANSESSION, DISCONNECTREASON,
// SUBSCRIBETOPIC or SUBSCRIBEQOS. Name is upper case.
type SessionExpr struct {
	Start Pos
	Name  string
}

// SessionWords lists the session keywords.
var SessionWords = []string{"CLIENTID", "USER", "ENDPOINT", "CLEANSESSION",
	"DISCONNECTREASON", "SUBSCRIBETOPIC", "SUBSCRIBEQOS"}

// CastExpr is <x> AS <type>.
type CastExpr struct {
	X     Expr
	Type  TypeName
	AsPos Pos
}

// Op is a unary or binary operator.
type Op int

// The operators, from the reference §3.1.
const (
	OpAdd Op = iota + 1
	OpSub
	OpMul
	OpDiv
	OpMod
	OpEq // ==, = or EQUALS
	OpNe
	OpLt
	OpGt
	OpLe
	OpGe
	OpContains
	OpStartsWith
	OpEndsWith
	OpAnd
	OpOr
	OpNot // unary
	OpNeg // unary minus
)

var opNames = map[Op]string{
	OpAdd: "+", OpSub: "-", OpMul: "*", OpDiv: "/", OpMod: "%", OpEq: "==",
	OpNe: "!=", OpLt: "<", OpGt: ">", OpLe: "<=", OpGe: ">=",
	OpContains: "CONTAINS", OpStartsWith: "STARTS_WITH", OpEndsWith: "ENDS_WITH",
	OpAnd: "AND", OpOr: "OR", OpNot: "NOT", OpNeg: "-",
}

// String returns the operator as written.
func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return "Op(?)"
}

// UnaryExpr is NOT x or -x.
type UnaryExpr struct {
	OpPos Pos
	Op    Op
	X     Expr
}

// BinaryExpr is x <op> y.
type BinaryExpr struct {
	X     Expr
	Op    Op
	OpPos Pos
	Y     Expr
}

// CondExpr is the conditional expression IF <cond> THEN <a> ELSE <b>.
type CondExpr struct {
	Start Pos
	Cond  Expr
	Then  Expr
	Else  Expr
}

// ObjectLit is a JSON object literal { "k": <expr>, ... }.
type ObjectLit struct {
	Start  Pos
	Fields []*ObjectField
}

// ObjectField is one "key": value of an ObjectLit.
type ObjectField struct {
	Key    string
	KeyPos Pos
	Value  Expr
}

// ArrayLit is a JSON array literal [ <expr>, ... ].
type ArrayLit struct {
	Start Pos
	Elems []Expr
}

// RuleTest is an atom of a rule condition:
//
//	USER IS <x> | USER HAS <flag> | USER IN GROUP <g>
//	CLIENTID IS <x> | CLIENTID MATCHES [REGEX] <re>
//	ENDPOINT IS|MATCHES ... | TOPIC EXISTS <topic> | GET TOPIC <topic> IS <x>
//
// Subject is USER, CLIENTID, ENDPOINT, TOPIC or GET TOPIC; Op is IS, HAS,
// IN GROUP, MATCHES, MATCHES REGEX or EXISTS. Topic is set for GET TOPIC.
type RuleTest struct {
	Start   Pos
	Subject string
	Topic   Expr
	Op      string
	OpPos   Pos
	Arg     Expr
}

// UnsupportedExpr is an expression Gantry recognises but does not
// evaluate (GET MODEL ... FROM a database connector). The checker refuses
// it.
type UnsupportedExpr struct {
	Start   Pos
	Feature string
	Text    string
}

func (e *StringLit) Pos() Pos         { return e.Start }
func (e *NumberLit) Pos() Pos         { return e.Start }
func (e *BoolLit) Pos() Pos           { return e.Start }
func (e *EmptyLit) Pos() Pos          { return e.Start }
func (e *VarRef) Pos() Pos            { return e.Start }
func (e *Ident) Pos() Pos             { return e.Start }
func (e *PayloadExpr) Pos() Pos       { return e.Start }
func (e *TopicPositionExpr) Pos() Pos { return e.Start }
func (e *GetTopicExpr) Pos() Pos      { return e.Start }
func (e *GetJSONExpr) Pos() Pos       { return e.Start }
func (e *GetEnvExpr) Pos() Pos        { return e.Start }
func (e *TimestampExpr) Pos() Pos     { return e.Start }
func (e *RandomExpr) Pos() Pos        { return e.Start }
func (e *ReplaceExpr) Pos() Pos       { return e.Start }
func (e *FilterExpr) Pos() Pos        { return e.Start }
func (e *TrimExpr) Pos() Pos          { return e.Start }
func (e *SessionExpr) Pos() Pos       { return e.Start }
func (e *CastExpr) Pos() Pos          { return e.X.Pos() }
func (e *UnaryExpr) Pos() Pos         { return e.OpPos }
func (e *BinaryExpr) Pos() Pos        { return e.X.Pos() }
func (e *CondExpr) Pos() Pos          { return e.Start }
func (e *ObjectLit) Pos() Pos         { return e.Start }
func (e *ArrayLit) Pos() Pos          { return e.Start }
func (e *RuleTest) Pos() Pos          { return e.Start }
func (e *UnsupportedExpr) Pos() Pos   { return e.Start }

func (*StringLit) exprNode()         {}
func (*NumberLit) exprNode()         {}
func (*BoolLit) exprNode()           {}
func (*EmptyLit) exprNode()          {}
func (*VarRef) exprNode()            {}
func (*Ident) exprNode()             {}
func (*PayloadExpr) exprNode()       {}
func (*TopicPositionExpr) exprNode() {}
func (*GetTopicExpr) exprNode()      {}
func (*GetJSONExpr) exprNode()       {}
func (*GetEnvExpr) exprNode()        {}
func (*TimestampExpr) exprNode()     {}
func (*RandomExpr) exprNode()        {}
func (*ReplaceExpr) exprNode()       {}
func (*FilterExpr) exprNode()        {}
func (*TrimExpr) exprNode()          {}
func (*SessionExpr) exprNode()       {}
func (*CastExpr) exprNode()          {}
func (*UnaryExpr) exprNode()         {}
func (*BinaryExpr) exprNode()        {}
func (*CondExpr) exprNode()          {}
func (*ObjectLit) exprNode()         {}
func (*ArrayLit) exprNode()          {}
func (*RuleTest) exprNode()          {}
func (*UnsupportedExpr) exprNode()   {}
