package modbus

import (
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"strconv"
	"sync"

	svm "github.com/simonvetter/modbus"

	"gantry/broker/topic"
	"gantry/drivers"
)

// ServerConfig is MODBUS_SERVER_CONFIG: a Modbus TCP server that serves
// the current value of each tag's topic (MODBUS_SERVER).
type ServerConfig struct {
	Addr       string // bind address host:port
	Advertised string // ADVERTISED_HOST, for listings
	UnitID     int    // -1: answer every unit id
	MaxClients int
	Tags       []*drivers.Tag
}

// ParseServer reads a MODBUS_SERVER: its config block and each tag's
// ADDRESS, ADDRESS_TYPE and DATA_TYPE (as for a device).
func ParseServer(s *drivers.Spec) *ServerConfig {
	c := &ServerConfig{UnitID: -1}
	cs := s.Config
	if cs == nil {
		return c
	}
	c.Addr = net.JoinHostPort(cs.String("BIND_IP", cs.String("HOST", "0.0.0.0")), strconv.Itoa(cs.Int("PORT", 502, 1, 65535)))
	c.Advertised = cs.String("ADVERTISED_HOST", "")
	if cs.Has("SLAVE_ID") || cs.Has("UNIT_ID") {
		c.UnitID = cs.Int("SLAVE_ID", cs.Int("UNIT_ID", 1, 0, 255), 0, 255)
	}
	c.MaxClients = cs.Int("MAX_CLIENTS", 32, 1, 1024)
	cfg := &Config{MaxRegisters: maxReadRegisters}
	for _, t := range s.Tags() {
		parseTag(t, cfg)
		if t.Writable && t.WriteTopic != "" {
			if err := topic.ValidateName(t.WriteTopic); err != nil {
				t.Settings.Errorf(t.Settings.Block.KindPos, "%s: a server publishes what a client writes to DESTINATION_TOPIC, which must be a topic without wildcards (%v)",
					t.Settings.Where(), err)
			}
		}
		c.Tags = append(c.Tags, t)
	}
	// Two tags on the same register would answer for each other.
	for i, a := range c.Tags {
		for _, b := range c.Tags[:i] {
			aa, ok1 := a.Addr.(Address)
			ba, ok2 := b.Addr.(Address)
			if ok1 && ok2 && aa.Area == ba.Area && aa.Start < ba.Start+ba.Count && ba.Start < aa.Start+aa.Count {
				a.Settings.Errorf(a.Settings.Block.KindPos, "%s overlaps tag %s (%s %d)", a.Settings.Where(), b.Name, ba.Area, ba.Start)
			}
		}
	}
	return c
}

// Describe names the listener.
func (c *ServerConfig) Describe() string {
	if c.Advertised != "" {
		_, port, _ := net.SplitHostPort(c.Addr)
		return "listening on " + c.Addr + " as " + net.JoinHostPort(c.Advertised, port)
	}
	return "listening on " + c.Addr
}

// Server serves tag values over Modbus TCP. Set gives it the current value
// of a tag; a client's write of a writable tag is handed to onWrite.
type Server struct {
	cfg     *ServerConfig
	onWrite func(t *drivers.Tag, v drivers.Value)
	srv     *svm.ModbusServer

	mu   sync.Mutex // guards vals
	vals map[*drivers.Tag]drivers.Value
}

// NewServer makes a server; Start binds it.
func NewServer(c *ServerConfig, onWrite func(t *drivers.Tag, v drivers.Value)) *Server {
	return &Server{cfg: c, onWrite: onWrite, vals: map[*drivers.Tag]drivers.Value{}}
}

// Start binds and serves; a bind that fails is returned (and not retried).
func (s *Server) Start() error {
	srv, err := svm.NewServer(&svm.ServerConfiguration{URL: "tcp://" + s.cfg.Addr, MaxClients: uint(s.cfg.MaxClients),
		Timeout: 120e9, Logger: log.New(io.Discard, "", 0)}, (*handler)(s))
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("modbus server: bind %s: %w", s.cfg.Addr, err)
	}
	s.srv = srv
	return nil
}

// Stop closes the listener and every client connection.
func (s *Server) Stop() {
	if s.srv != nil {
		s.srv.Stop()
	}
}

// Set records the current value of a tag.
func (s *Server) Set(t *drivers.Tag, v drivers.Value) {
	s.mu.Lock()
	s.vals[t] = v
	s.mu.Unlock()
}

type handler Server

// words returns count registers from start of area: each tag's current
// value encoded (0 until its topic has a value); a register no tag covers
// is an illegal data address.
func (h *handler) words(area Area, start, count uint16, unit uint8) ([]byte, error) {
	if h.cfg.UnitID >= 0 && int(unit) != h.cfg.UnitID {
		return nil, svm.ErrGWTargetFailedToRespond
	}
	out := make([]byte, 2*int(count))
	covered := make([]bool, count)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.cfg.Tags {
		a, ok := t.Addr.(Address)
		if !ok || a.Area != area || a.Start >= start+count || a.Start+a.Count <= start {
			continue
		}
		var b []byte
		if v, ok := h.vals[t]; ok {
			b, _ = t.Encode(v)
		}
		if b == nil {
			b = make([]byte, 2*int(a.Count))
		}
		for k := range int(a.Count) {
			r := int(a.Start) + k - int(start)
			if r >= 0 && r < int(count) {
				out[2*r], out[2*r+1] = b[2*k], b[2*k+1]
				covered[r] = true
			}
		}
	}
	if slices.Contains(covered, false) {
		return nil, svm.ErrIllegalDataAddress
	}
	return out, nil
}

func (h *handler) bits(area Area, start, count uint16, unit uint8) ([]bool, error) {
	if h.cfg.UnitID >= 0 && int(unit) != h.cfg.UnitID {
		return nil, svm.ErrGWTargetFailedToRespond
	}
	out := make([]bool, count)
	covered := make([]bool, count)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.cfg.Tags {
		a, ok := t.Addr.(Address)
		if !ok || a.Area != area || a.Start < start || a.Start >= start+count {
			continue
		}
		out[a.Start-start] = h.vals[t].Bool
		covered[a.Start-start] = true
	}
	if slices.Contains(covered, false) {
		return nil, svm.ErrIllegalDataAddress
	}
	return out, nil
}

// write decodes what a client writes to the registers of whole writable
// tags and hands each value on.
func (h *handler) write(area Area, start uint16, regs []uint16) error {
	end := start + uint16(len(regs))
	var found []*drivers.Tag
	for _, t := range h.cfg.Tags {
		a, ok := t.Addr.(Address)
		if !ok || a.Area != area || a.Start >= end || a.Start+a.Count <= start {
			continue
		}
		if !t.Writable || a.Start < start || a.Start+a.Count > end {
			return svm.ErrIllegalDataAddress // read-only, or only part of a tag
		}
		found = append(found, t)
	}
	if len(found) == 0 {
		return svm.ErrIllegalDataAddress
	}
	for _, t := range found {
		a := t.Addr.(Address)
		b := make([]byte, 2*int(a.Count))
		for k := range int(a.Count) {
			r := regs[int(a.Start-start)+k]
			b[2*k], b[2*k+1] = byte(r>>8), byte(r)
		}
		v, err := t.Decode(b)
		if err != nil {
			return svm.ErrIllegalDataValue
		}
		h.onWrite(t, v)
	}
	return nil
}

func (h *handler) HandleCoils(r *svm.CoilsRequest) ([]bool, error) {
	if r.IsWrite {
		for i, on := range r.Args {
			var t *drivers.Tag
			for _, c := range h.cfg.Tags {
				if a, ok := c.Addr.(Address); ok && a.Area == Coil && a.Start == r.Addr+uint16(i) && c.Writable {
					t = c
				}
			}
			if t == nil {
				return nil, svm.ErrIllegalDataAddress
			}
			h.onWrite(t, drivers.BoolValue(on))
		}
		return nil, nil
	}
	return h.bits(Coil, r.Addr, r.Quantity, r.UnitId)
}

func (h *handler) HandleDiscreteInputs(r *svm.DiscreteInputsRequest) ([]bool, error) {
	return h.bits(Discrete, r.Addr, r.Quantity, r.UnitId)
}

func (h *handler) HandleHoldingRegisters(r *svm.HoldingRegistersRequest) ([]uint16, error) {
	if r.IsWrite {
		return nil, h.write(Holding, r.Addr, r.Args)
	}
	b, err := h.words(Holding, r.Addr, r.Quantity, r.UnitId)
	return toRegs(b), err
}

func (h *handler) HandleInputRegisters(r *svm.InputRegistersRequest) ([]uint16, error) {
	b, err := h.words(Input, r.Addr, r.Quantity, r.UnitId)
	return toRegs(b), err
}

func toRegs(b []byte) []uint16 {
	if b == nil {
		return nil
	}
	out := make([]uint16, len(b)/2)
	for i := range out {
		out[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
	}
	return out
}
