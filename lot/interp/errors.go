package interp

import (
	"errors"
	"fmt"

	"gantry/lot/syntax"
)

// Sentinel errors. Every error of Compile, Run, Call and Evaluate is an
// *Error whose chain holds one of these, so callers can test with
// errors.Is.
var (
	// ErrCompile: a definition cannot run (an unsupported statement, a bad
	// regular expression, a word that is not a value).
	ErrCompile = errors.New("interp: cannot compile")
	// ErrNotNumber: arithmetic on a value that is not a number.
	ErrNotNumber = errors.New("interp: not a number")
	// ErrDivisionByZero: / or % by zero.
	ErrDivisionByZero = errors.New("interp: division by zero")
	// ErrNumberRange: a result too large for a number, or an INT cast out
	// of range.
	ErrNumberRange = errors.New("interp: number out of range")
	// ErrCast: a value that cannot be cast to the type asked for.
	ErrCast = errors.New("interp: cannot cast")
	// ErrBadJSON: GET JSON, AS JSON/OBJECT/ARRAY or a model field on text
	// that is not JSON.
	ErrBadJSON = errors.New("interp: bad JSON")
	// ErrTopic: TOPIC POSITION without a message or with a bad position,
	// or a computed topic that is not a valid topic name.
	ErrTopic = errors.New("interp: bad topic")
	// ErrTooLarge: a value grew past Options.MaxValueBytes.
	ErrTooLarge = errors.New("interp: value too large")
	// ErrLoopLimit: a LOOP ran Options.MaxLoopIterations times without
	// its UNTIL becoming true.
	ErrLoopLimit = errors.New("interp: loop iteration limit")
	// ErrStepLimit: a run executed Options.MaxSteps statements.
	ErrStepLimit = errors.New("interp: step limit")
	// ErrCallDepth: CALL ACTION nested deeper than Options.MaxCallDepth.
	ErrCallDepth = errors.New("interp: call depth limit")
	// ErrUnknown: CALL ACTION or PUBLISH MODEL names something that is
	// not deployed, or a field or input that does not exist.
	ErrUnknown = errors.New("interp: unknown name")
	// ErrUnavailable: the Host lacks what a statement needs (no Effects,
	// no Callables, no way to fire connector events...).
	ErrUnavailable = errors.New("interp: not available")
	// ErrEffect: the Host's Effects refused a publish or keep.
	ErrEffect = errors.New("interp: effect failed")
	// ErrPanic: the interpreter or a Host implementation panicked; the
	// run was stopped and the panic turned into this error.
	ErrPanic = errors.New("interp: internal error")
)

// Error is a compile or runtime error of one definition. It names the
// definition, the place in its source and what went wrong, for instance
//
//	action HotCheck at 7:12: division by zero
//	action Pair at 15:5: CALL ACTION Average2: action Average2 at 6:5: ...
//
// The runtime publishes Error() retained on
// $SYS/Coreflux/Actions/<Def>/Error.
type Error struct {
	Kind string     // "action" or "model"
	Def  string     // the action or model name
	Pos  syntax.Pos // where in the definition's source
	Err  error      // what went wrong; its chain holds a sentinel
}

// Error formats the error on one line.
func (e *Error) Error() string {
	return fmt.Sprintf("%s %s at %s: %v", e.Kind, e.Def, e.Pos, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// detail is a cause with its own message whose chain holds a sentinel:
// Error() is the message a person reads ("division by zero", "cannot cast
// "abc" to INT"), Unwrap the sentinel errors.Is looks for.
type detail struct {
	sentinel error
	msg      string
}

func (d *detail) Error() string { return d.msg }
func (d *detail) Unwrap() error { return d.sentinel }

// errorf builds a cause of kind sentinel with a formatted message.
func errorf(sentinel error, format string, args ...any) error {
	return &detail{sentinel: sentinel, msg: fmt.Sprintf(format, args...)}
}
