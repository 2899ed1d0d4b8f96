package drivers

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"gantry/broker/topic"
	"gantry/lot/syntax"
)

// DefaultEvery is a mapping's poll interval without WITH EVERY.
const DefaultEvery = time.Second

// MinEvery is the shortest poll interval.
const MinEvery = 10 * time.Millisecond

// Spec is a deployed connector, read from its DEFINE CONNECTOR source:
// what every protocol shares. The protocol block (MODBUS_CONFIG, ...) and
// each tag's protocol settings (address) are left to the protocol, in
// Config and Tag.Settings.
type Spec struct {
	Name        string
	Type        string // canonical: MODBUS_TCP, MODBUS_SERIAL, SIEMENS_S7, OPCUA, MQTT_BRIDGE
	Source      *syntax.Connector
	Config      *Settings // the protocol block; nil when the type has none
	Mappings    []*Mapping
	ClusterNode string // CONNECTOR_CONFIG CLUSTER_NODE, "" when not pinned
}

// Mapping is ADD MAPPING: tags polled together.
type Mapping struct {
	Name     string
	Every    time.Duration
	Prefix   string // SOURCE_TOPIC of the mapping: tags publish to Prefix/<tag> unless they name their own
	Settings *Settings
	Tags     []*Tag
}

// DataType is a tag's DATA_TYPE.
type DataType uint8

// Tag data types.
const (
	Int16 DataType = iota + 1
	UInt16
	Int32
	UInt32
	Float32
	Float64
	Bool
	String
)

var typeNames = []string{"", "INT16", "UINT16", "INT32", "UINT32", "FLOAT32", "FLOAT64", "BOOL", "STRING"}

var typeAliases = map[string]string{"FLOAT": "FLOAT32", "REAL": "FLOAT32", "DOUBLE": "FLOAT64", "LREAL": "FLOAT64",
	"BOOLEAN": "BOOL", "INT": "INT16", "UINT": "UINT16", "WORD": "UINT16", "DINT": "INT32", "DWORD": "UINT32", "UDINT": "UINT32"}

func (d DataType) String() string {
	if int(d) < len(typeNames) {
		return typeNames[d]
	}
	return "DataType(?)"
}

// Numeric reports whether values of d are numbers (scaled, deadbanded).
func (d DataType) Numeric() bool { return d != Bool && d != String }

// Tag is ADD TAG: one value of the device.
type Tag struct {
	Name       string
	Topic      string // where read values are published
	Type       DataType
	ByteSwap   bool // the two bytes of each 16-bit word come low byte first
	WordSwap   bool // multi-word values come low word first
	Scale      float64
	Offset     float64
	Deadband   float64 // < 0: publish every poll; 0: on change; > 0: on a change larger than this
	Min, Max   float64 // range of written engineering values; NaN: the type's range only
	Decimals   int     // DECIMAL_PLACES; -1: shortest form
	Writable   bool
	WriteTopic string // DESTINATION_TOPIC
	Length     int    // STRING: bytes
	JSON       bool   // PUBLISH_MODE JSON
	Unit       string
	Retain     bool
	Settings   *Settings // the block: the protocol reads its address from it
	Addr       any       // the protocol's parsed address
}

// Parse reads the parts of a connector every protocol shares; configKind
// names the protocol block ("" for none). Problems are appended to errs.
func Parse(c *syntax.Connector, configKind string, env Env, errs *[]error) *Spec {
	s := &Spec{Name: c.Name, Type: c.Type, Source: c}
	for _, b := range c.Blocks {
		switch b.Kind {
		case "CONNECTOR_CONFIG":
			cs := NewSettings(b, env, errs)
			s.ClusterNode = cs.String("CLUSTER_NODE", "")
			cs.Finish("OVERLOAD_POLICY", "OVERLOAD_TIMEOUT", "OVERLOAD_CAPACITY")
		case configKind:
			s.Config = NewSettings(b, env, errs)
		case "MAPPING":
			s.Mappings = append(s.Mappings, parseMapping(b, env, errs))
		}
	}
	if configKind != "" && s.Config == nil {
		*errs = append(*errs, &ConfigError{Pos: c.TypePos, Msg: fmt.Sprintf("connector %s needs ADD %s", c.Name, configKind)})
	}
	return s
}

func parseMapping(b *syntax.ConfigBlock, env Env, errs *[]error) *Mapping {
	ms := NewSettings(b, env, errs)
	m := &Mapping{Name: b.Name, Settings: ms, Every: ms.Interval("EVERY", DefaultEvery), Prefix: ms.String("SOURCE_TOPIC", "")}
	if m.Every < MinEvery {
		ms.Errorf(ms.Pair("EVERY").Value().Pos, "%s EVERY %v is shorter than %v", ms.Where(), m.Every, MinEvery)
		m.Every = MinEvery
	}
	for _, tb := range b.Blocks {
		if tb.Kind == "TAG" {
			m.Tags = append(m.Tags, parseTag(m, tb, env, errs))
		}
	}
	return m
}

var orders = []string{"BIG", "LITTLE", "ABCD", "DCBA", "BADC", "CDAB"}
var orderAliases = map[string]string{"BIGENDIAN": "BIG", "BIG_ENDIAN": "BIG", "LITTLEENDIAN": "LITTLE", "LITTLE_ENDIAN": "LITTLE",
	"MSB": "BIG", "LSB": "LITTLE", "HIGH_WORD_FIRST": "BIG", "LOW_WORD_FIRST": "LITTLE"}

func parseTag(m *Mapping, b *syntax.ConfigBlock, env Env, errs *[]error) *Tag {
	ts := NewSettings(b, env, errs)
	t := &Tag{Name: b.Name, Settings: ts, Decimals: -1, Min: math.NaN(), Max: math.NaN()}
	if t.Name == "" {
		ts.Errorf(b.KindPos, "ADD TAG needs a name")
	}
	names := typeNames[1:]
	t.Type = DataType(indexOf(names, ts.OneOf("DATA_TYPE", "UINT16", names, typeAliases)) + 1)
	t.Topic = ts.String("SOURCE_TOPIC", "")
	if t.Topic == "" {
		if m.Prefix == "" {
			ts.Errorf(b.KindPos, "%s needs WITH SOURCE_TOPIC, or its mapping one (the tag then publishes to <mapping topic>/%s)", ts.Where(), t.Name)
		} else {
			t.Topic = strings.TrimSuffix(m.Prefix, "/") + "/" + t.Name
		}
	}
	if t.Topic != "" {
		if err := topic.ValidateName(t.Topic); err != nil {
			ts.Errorf(b.KindPos, "%s: topic %q: %v", ts.Where(), t.Topic, err)
		}
	}
	switch ts.OneOf("BYTE_ORDER", "BIG", orders, orderAliases) {
	case "LITTLE", "BADC":
		t.ByteSwap = true
	case "DCBA":
		t.ByteSwap, t.WordSwap = true, true
	case "CDAB":
		t.WordSwap = true
	}
	if ts.OneOf("WORD_ORDER", "BIG", []string{"BIG", "LITTLE"}, orderAliases) == "LITTLE" {
		t.WordSwap = !t.WordSwap
	}
	t.Scale = ts.Float("SCALING", 1)
	if t.Scale == 0 {
		ts.Errorf(ts.Pair("SCALING").Value().Pos, "%s SCALING must not be 0", ts.Where())
		t.Scale = 1
	}
	t.Offset = ts.Float("OFFSET", 0)
	t.Deadband = -1
	if ts.Has("DEADBAND") {
		t.Deadband = ts.Float("DEADBAND", 0)
		if t.Deadband < 0 {
			ts.Errorf(ts.Pair("DEADBAND").Value().Pos, "%s DEADBAND = %v, want 0 or more", ts.Where(), t.Deadband)
		}
	}
	t.Min, t.Max = ts.Float("MIN_VALUE", math.NaN()), ts.Float("MAX_VALUE", math.NaN())
	if t.Min > t.Max {
		ts.Errorf(ts.Pair("MIN_VALUE").Value().Pos, "%s MIN_VALUE %v is above MAX_VALUE %v", ts.Where(), t.Min, t.Max)
	}
	t.Decimals = ts.Int("DECIMAL_PLACES", -1, 0, 15)
	t.Writable = ts.Bool("WRITABLE", false)
	t.WriteTopic = ts.String("DESTINATION_TOPIC", "")
	if t.Writable && t.WriteTopic == "" {
		ts.Errorf(b.KindPos, "%s is WRITABLE: give it WITH DESTINATION_TOPIC \"<topic>\" to receive the values to write", ts.Where())
	}
	if t.WriteTopic != "" {
		if err := topic.ValidateFilter(t.WriteTopic); err != nil {
			ts.Errorf(ts.Pair("DESTINATION_TOPIC").Value().Pos, "%s DESTINATION_TOPIC %q: %v", ts.Where(), t.WriteTopic, err)
		}
		if !t.Writable {
			ts.Errorf(ts.Pair("DESTINATION_TOPIC").Value().Pos, "%s has a DESTINATION_TOPIC but is not WRITABLE: add WITH WRITABLE true", ts.Where())
		}
	}
	t.Length = ts.Int("LENGTH", 0, 1, 4096)
	if t.Type == String && t.Length == 0 && !ts.Has("LENGTH") {
		t.Length = 16
	}
	t.JSON = ts.OneOf("PUBLISH_MODE", "VALUE", []string{"VALUE", "JSON"}, map[string]string{"PLAIN": "VALUE", "RAW": "VALUE"}) == "JSON"
	t.Unit = ts.String("UNIT", "")
	t.Retain = ts.Bool("RETAIN", m.Settings.Bool("RETAIN", false))
	return t
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return 0
}

// Finish reports the settings no one read, in every block of the spec.
// Call it after the protocol has read its own.
func (s *Spec) Finish() {
	if s.Config != nil {
		s.Config.Finish()
	}
	for _, m := range s.Mappings {
		m.Settings.Finish("DESCRIPTION")
		for _, t := range m.Tags {
			t.Settings.Finish("DESCRIPTION")
		}
	}
}

// Tags returns every tag of every mapping.
func (s *Spec) Tags() []*Tag {
	var out []*Tag
	for _, m := range s.Mappings {
		out = append(out, m.Tags...)
	}
	return out
}

// Join makes one error of a parse's problems, nil when there is none.
func Join(errs []error) error { return errors.Join(errs...) }
