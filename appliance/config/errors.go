package config

import (
	"fmt"
	"strings"
)

// Error is a configuration that cannot be used. It lists every problem
// found, each a line of the form
//
//	config: Mqtt.Port = 70000, want 0..65535
//	config: unknown key "Mqtt.Prot"
//	config: COREFLUX_MQTT_PORT = "abc": want an integer
type Error struct {
	Problems []string // one line each, starting with "config: "
}

func (e *Error) Error() string { return strings.Join(e.Problems, "\n") }

// problem is one finding of Validate about a field, before it is written
// as a line.
type problem struct {
	path  string // the field the problem is reported on
	value string // its value, formatted for the message
	want  string // what it should be
}

func (p problem) line() string {
	return fmt.Sprintf("config: %s = %s, want %s", p.path, p.value, p.want)
}

// withSource is the line, naming the environment variable env when the
// value came from there.
func (p problem) withSource(env string) string {
	if env == "" {
		return p.line()
	}
	return p.line() + " (from " + env + ")"
}

func errorOf(ps []problem) error {
	if len(ps) == 0 {
		return nil
	}
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.line()
	}
	return &Error{Problems: lines}
}
