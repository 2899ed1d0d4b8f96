package engine

import (
	"strconv"
	"sync"
	"time"

	"gantry/drivers"
)

// TagValue is a tag's latest reading on this node, for the console.
type TagValue struct {
	Tag        string
	Topic      string
	Type       string // DATA_TYPE
	Unit       string
	Writable   bool
	WriteTopic string
	Value      string    // the plain value; "" before the first reading
	At         time.Time // when it was read (or, for a server connector, received)
	Error      string    // why the device refuses the tag now
}

// tagValues keeps the latest reading of each tag: the poller's goroutine
// (or a server connector's broker client) writes, the console reads.
type tagValues struct {
	mu   sync.Mutex // guards last
	last map[*drivers.Tag]reading
}

type reading struct {
	v  drivers.Value
	at time.Time
}

// note records t's value as read now.
func (tv *tagValues) note(t *drivers.Tag, v drivers.Value) {
	tv.mu.Lock()
	if tv.last == nil {
		tv.last = map[*drivers.Tag]reading{}
	}
	tv.last[t] = reading{v, time.Now()}
	tv.mu.Unlock()
}

// plain is a value as the tag's plain payload writes it.
func plain(t *drivers.Tag, v drivers.Value) string {
	switch v.Kind {
	case drivers.Number:
		return t.FormatNumber(v.Num)
	case drivers.Boolean:
		return strconv.FormatBool(v.Bool)
	}
	return v.Str
}

// TagValues returns the tags of connector name, in definition order,
// each with its latest reading on this node; false when no such
// connector is deployed.
func (m *Manager) TagValues(name string) ([]TagValue, bool) {
	m.mu.Lock()
	c := m.connectors[name]
	m.mu.Unlock()
	if c == nil {
		return nil, false
	}
	c.st.mu.Lock()
	errs := make(map[string]string, len(c.st.tagErrors))
	for k, v := range c.st.tagErrors {
		errs[k] = v
	}
	c.st.mu.Unlock()
	tags := c.spec.Tags()
	out := make([]TagValue, 0, len(tags))
	c.values.mu.Lock()
	defer c.values.mu.Unlock()
	for _, t := range tags {
		tv := TagValue{Tag: t.Name, Topic: t.Topic, Type: t.Type.String(), Unit: t.Unit, Writable: t.Writable,
			WriteTopic: t.WriteTopic, Error: errs[t.Name]}
		if r, ok := c.values.last[t]; ok {
			tv.Value, tv.At = plain(t, r.v), r.at
		}
		out = append(out, tv)
	}
	return out, true
}
