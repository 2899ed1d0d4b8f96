package drivers

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gantry/lot/syntax"
)

// Env resolves GET ENV and GET SECRET values (the LoT engine's store of
// -setEnv and -setSecret).
type Env interface {
	Env(name string) (string, bool)
	Secret(name string) (string, bool)
}

// ConfigError is a problem of one setting, at its place in the source.
type ConfigError struct {
	Pos syntax.Pos
	Msg string
}

func (e *ConfigError) Error() string {
	if e.Pos.IsValid() {
		return fmt.Sprintf("line %d col %d: %s", e.Pos.Line, e.Pos.Col, e.Msg)
	}
	return e.Msg
}

// Position lets the command interface point at the setting.
func (e *ConfigError) Position() (line, column int) { return e.Pos.Line, e.Pos.Col }

// Settings reads the WITH lines of one block strictly: each getter marks
// its key as read, and Finish reports the keys nobody read. Problems are
// collected, not returned one by one, so that a deploy names them all.
type Settings struct {
	Block *syntax.ConfigBlock
	where string // "MODBUS_CONFIG", "TAG Temperature": for messages
	env   Env
	errs  *[]error
	used  map[string]bool
}

// NewSettings reads b; problems are appended to errs.
func NewSettings(b *syntax.ConfigBlock, env Env, errs *[]error) *Settings {
	where := b.Written
	if b.Name != "" {
		where += " " + b.Name
	}
	return &Settings{Block: b, where: where, env: env, errs: errs, used: map[string]bool{}}
}

// Where names the block in messages.
func (s *Settings) Where() string { return s.where }

// Errorf records a problem at pos.
func (s *Settings) Errorf(pos syntax.Pos, format string, args ...any) {
	*s.errs = append(*s.errs, &ConfigError{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

// Has reports whether key is set (and marks it read).
func (s *Settings) Has(key string) bool {
	s.used[key] = true
	return s.Block.Pair(key) != nil
}

// Pair returns the pair of key, or nil, and marks it read.
func (s *Settings) Pair(key string) *syntax.ConfigPair {
	s.used[key] = true
	return s.Block.Pair(key)
}

// text resolves the first value item of p to text.
func (s *Settings) text(p *syntax.ConfigPair) string {
	v := p.Value()
	switch v.Kind {
	case syntax.ValueEnv, syntax.ValueSecret:
		if s.env == nil {
			s.Errorf(v.Pos, "%s %s: GET ENV and GET SECRET need the LoT engine", s.where, p.Key)
			return ""
		}
		get, what := s.env.Env, "-setEnv"
		if v.Kind == syntax.ValueSecret {
			get, what = s.env.Secret, "-setSecret"
		}
		val, ok := get(v.Text)
		if !ok {
			s.Errorf(v.Pos, "%s %s: %q is not set; set it with %s", s.where, p.Key, v.Text, what)
		}
		return val
	}
	if len(p.Values) > 1 {
		return p.Raw
	}
	return v.Text
}

// String returns key's text, or def when it is not set.
func (s *Settings) String(key, def string) string {
	p := s.Pair(key)
	if p == nil {
		return def
	}
	return s.text(p)
}

// OneOf returns key's value, upper case, which must be one of allowed
// (aliases maps other spellings onto them); def when not set.
func (s *Settings) OneOf(key, def string, allowed []string, aliases map[string]string) string {
	p := s.Pair(key)
	if p == nil {
		return def
	}
	v := strings.ToUpper(strings.TrimSpace(s.text(p)))
	if a, ok := aliases[v]; ok {
		v = a
	}
	if !slices.Contains(allowed, v) {
		s.Errorf(p.Value().Pos, "%s %s = %q, want one of %s", s.where, key, s.text(p), strings.Join(allowed, ", "))
		return def
	}
	return v
}

// Float returns key's number (bare or quoted), def when not set.
func (s *Settings) Float(key string, def float64) float64 {
	p := s.Pair(key)
	if p == nil {
		return def
	}
	v := p.Value()
	if v.Kind == syntax.ValueNumber {
		return v.Number
	}
	t := strings.TrimSpace(s.text(p))
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		s.Errorf(v.Pos, "%s %s = %q, want a number", s.where, key, t)
		return def
	}
	return f
}

// Int returns key's integer in lo..hi, def when not set.
func (s *Settings) Int(key string, def, lo, hi int) int {
	p := s.Pair(key)
	if p == nil {
		return def
	}
	f := s.Float(key, math.NaN())
	if math.IsNaN(f) {
		return def
	}
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		s.Errorf(p.Value().Pos, "%s %s = %s, want a whole number in %d..%d", s.where, key, p.Raw, lo, hi)
		return def
	}
	return int(f)
}

// Millis returns key, a number of milliseconds in lo..hi, as a duration.
func (s *Settings) Millis(key string, def time.Duration, lo, hi int) time.Duration {
	return time.Duration(s.Int(key, int(def/time.Millisecond), lo, hi)) * time.Millisecond
}

// Bool returns key's boolean (TRUE/FALSE bare or quoted), def when not set.
func (s *Settings) Bool(key string, def bool) bool {
	p := s.Pair(key)
	if p == nil {
		return def
	}
	v := p.Value()
	if v.Kind == syntax.ValueBool {
		return v.Bool
	}
	switch strings.ToLower(strings.TrimSpace(s.text(p))) {
	case "true", "1", "yes", "on":
		return true
	case "false", "0", "no", "off":
		return false
	}
	s.Errorf(v.Pos, "%s %s = %q, want true or false", s.where, key, p.Raw)
	return def
}

// Interval returns WITH <key> <n> <unit>, def when not set.
func (s *Settings) Interval(key string, def time.Duration) time.Duration {
	p := s.Pair(key)
	if p == nil {
		return def
	}
	d, ok := p.Interval()
	if !ok || d <= 0 {
		s.Errorf(p.Value().Pos, "%s %s %s: want <n> <unit>, such as 500 MILLISECONDS", s.where, key, p.Raw)
		return def
	}
	return d
}

// Finish reports every key of the block nobody read; known lists keys
// that are accepted and ignored (DESCRIPTION, UNIT).
func (s *Settings) Finish(ignored ...string) {
	for _, p := range s.Block.Pairs {
		if s.used[p.Key] || slices.Contains(ignored, p.Key) {
			continue
		}
		s.Errorf(p.KeyPos, "%s: unknown setting %s", s.where, p.Key)
	}
}
