package command

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// OutputTopic is where replies are published; CommandTopic where commands
// arrive.
const (
	CommandTopic = "$SYS/Coreflux/Command"
	OutputTopic  = "$SYS/Coreflux/Command/Output"
)

// Reply is the JSON envelope published on OutputTopic (LOT.md §8.1):
//
//	{"success":true,"command":"AddRoute","requestId":"…","message":"Route 'X' added successfully!",
//	 "entityType":"Route","entityName":"X","data":{}}
//
// Failures have success false and errors, which for LoT errors carry line,
// column, the source lines around them and suggestions. The message keeps
// the sentences of older brokers ("User op added successfully!", "Removed
// all models successfully") for clients that match substrings.
type Reply struct {
	Success    bool            `json:"success"`
	Command    string          `json:"command"`
	RequestID  string          `json:"requestId,omitempty"`
	Message    string          `json:"message"`
	EntityType string          `json:"entityType,omitempty"`
	EntityName string          `json:"entityName,omitempty"`
	Data       json.RawMessage `json:"data"` // always present: {} when empty
	Errors     []ReplyError    `json:"errors,omitempty"`
}

// ReplyError is one error of a failed command.
type ReplyError struct {
	Message     string   `json:"message"`
	Line        int      `json:"line,omitempty"`
	Column      int      `json:"column,omitempty"`
	SourceLines []string `json:"sourceLines,omitempty"`
	Suggestions []string `json:"suggestions,omitempty"`
}

var emptyData = json.RawMessage("{}")

// MarshalJSON encodes the envelope, with data {} when unset.
func (r Reply) MarshalJSON() ([]byte, error) {
	type plain Reply
	if len(r.Data) == 0 {
		r.Data = emptyData
	}
	return json.Marshal(plain(r))
}

// Encode returns the payload to publish.
func (r Reply) Encode() []byte {
	b, err := json.Marshal(r)
	if err != nil { // Data was not valid JSON: keep the envelope valid
		r.Data = emptyData
		r.Errors = append(r.Errors, ReplyError{Message: "reply data could not be encoded: " + err.Error()})
		b, _ = json.Marshal(r)
	}
	return b
}

// Positioned is implemented by errors that point into LoT source, such as
// those of the parser and the checker. Line and column are 1-based.
type Positioned interface {
	error
	Position() (line, column int)
}

// Suggester is implemented by errors that can propose fixes.
type Suggester interface {
	Suggestions() []string
}

// replyErrors flattens err (errors.Join trees included) into reply errors;
// source, when known, gives the lines around a position.
func replyErrors(err error, source string) []ReplyError {
	var out []ReplyError
	for _, e := range flatten(err) {
		re := ReplyError{Message: e.Error()}
		var p Positioned
		if errors.As(e, &p) {
			re.Line, re.Column = p.Position()
			re.SourceLines = sourceLines(source, re.Line, re.Column)
		}
		var s Suggester
		if errors.As(e, &s) {
			re.Suggestions = s.Suggestions()
		}
		out = append(out, re)
	}
	return out
}

// flatten returns the leaves of an errors.Join tree (at most 50).
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
		if len(out) >= 50 {
			return out[:50]
		}
	}
	return out
}

// sourceLines renders the line before the error, the error line and a
// caret under the column, each prefixed with its line number:
//
//	1 | DEFINE ACTION X
//	2 |     PUBLSH TOPIC "a" WITH 1
//	  |     ^
func sourceLines(source string, line, col int) []string {
	if source == "" || line < 1 {
		return nil
	}
	lines := strings.Split(source, "\n")
	if line > len(lines) {
		return nil
	}
	width := len(fmt.Sprint(line))
	var out []string
	for n := max(1, line-1); n <= line; n++ {
		out = append(out, fmt.Sprintf("%*d | %s", width, n, strings.TrimRight(lines[n-1], "\r")))
	}
	if col >= 1 {
		out = append(out, fmt.Sprintf("%*s | %s^", width, "", strings.Repeat(" ", col-1)))
	}
	return out
}
