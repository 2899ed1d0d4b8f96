package s7

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/robinson/gos7"

	"gantry/drivers"
)

// Config is S7_CONFIG.
type Config struct {
	Addr           string // host:port
	Rack, Slot     int
	CPU            string
	ConnectTimeout time.Duration
	ReadTimeout    time.Duration
	MaxGap         int // unused bytes a read may span to merge two tags
}

// maxRead is the bytes of one read request gos7 sends whole (PDU 480 −
// 18); longer ranges are split by gos7 itself.
const maxRead = 462

var cpuSlots = map[string]int{"S7300": 2, "S7400": 3, "S71200": 1, "S71500": 1, "LOGO": 1}

// Parse reads S7_CONFIG and each tag's ADDRESS.
func Parse(s *drivers.Spec) *Config {
	c := &Config{}
	cs := s.Config
	if cs == nil {
		return c
	}
	host := cs.String("IP", cs.String("HOST", ""))
	if host == "" {
		cs.Errorf(cs.Block.KindPos, "%s needs WITH IP \"<address of the PLC>\"", cs.Where())
	}
	c.Addr = net.JoinHostPort(host, strconv.Itoa(cs.Int("PORT", 102, 1, 65535)))
	c.CPU = cs.OneOf("CPU_TYPE", "S71500", []string{"S7300", "S7400", "S71200", "S71500", "LOGO"},
		map[string]string{"S7-300": "S7300", "S7-400": "S7400", "S7-1200": "S71200", "S7-1500": "S71500"})
	c.Rack = cs.Int("RACK", 0, 0, 7)
	c.Slot = cs.Int("SLOT", cpuSlots[c.CPU], 0, 31)
	c.ConnectTimeout = cs.Millis("CONNECTION_TIMEOUT", 5*time.Second, 10, 600_000)
	c.ReadTimeout = cs.Millis("READ_TIMEOUT", time.Second, 10, 600_000)
	c.MaxGap = cs.Int("MAX_GAP", 16, 0, maxRead)
	for _, t := range s.Tags() {
		parseTag(t)
	}
	return c
}

func parseTag(t *drivers.Tag) {
	ts := t.Settings
	p := ts.Pair("ADDRESS")
	if p == nil {
		ts.Errorf(ts.Block.KindPos, "%s needs WITH ADDRESS \"DB1.DBD0\"", ts.Where())
		return
	}
	a, err := ParseAddress(ts.String("ADDRESS", ""))
	if err != nil {
		ts.Errorf(p.Value().Pos, "%s: %v", ts.Where(), err)
		return
	}
	if !ts.Has("DATA_TYPE") {
		t.Type = map[byte]drivers.DataType{'X': drivers.Bool, 'B': drivers.UInt16, 'W': drivers.Int16, 'D': drivers.Float32}[a.Size]
	}
	ok := true
	switch a.Size {
	case 'X':
		ok = t.Type == drivers.Bool
	case 'W':
		ok = t.Type == drivers.Int16 || t.Type == drivers.UInt16
	case 'D':
		ok = t.Type == drivers.Int32 || t.Type == drivers.UInt32 || t.Type == drivers.Float32
	case 'B':
		ok = t.Type != drivers.Bool
	}
	if !ok {
		ts.Errorf(p.Value().Pos, "%s: %s does not hold a %s (X: BOOL; W: INT16, UINT16; D: INT32, UINT32, FLOAT32; B: any but BOOL, from that byte)",
			ts.Where(), a, t.Type)
	}
	if a.Byte+size(t, a) > maxOffset+1 {
		ts.Errorf(p.Value().Pos, "%s: %s and %d bytes go past offset %d", ts.Where(), a, size(t, a), maxOffset)
	}
	t.Addr = a
}

// size is the bytes a tag reads.
func size(t *drivers.Tag, a Address) int {
	if a.HasBit {
		return 1
	}
	return t.Bytes()
}

// Device is one S7 connection.
type Device struct {
	cfg    *Config
	mu     sync.Mutex // guards h
	h      *gos7.TCPClientHandler
	client gos7.Client
}

// New makes the device of a configuration.
func New(c *Config) *Device { return &Device{cfg: c} }

// Open implements drivers.Device: a new handler for every connection
// (gos7 never redials a handler whose Connect failed), and no idle
// timeout (gos7 then never dials again).
func (d *Device) Open(ctx context.Context) error {
	h := gos7.NewTCPClientHandler(d.cfg.Addr, d.cfg.Rack, d.cfg.Slot)
	h.Timeout = d.cfg.ReadTimeout
	h.IdleTimeout = 0
	cctx, cancel := context.WithTimeout(ctx, d.cfg.ConnectTimeout)
	defer cancel()
	if err := h.ConnectContext(cctx); err != nil {
		h.Close()
		return fmt.Errorf("s7: connect %s rack %d slot %d: %w", d.cfg.Addr, d.cfg.Rack, d.cfg.Slot, err)
	}
	d.mu.Lock()
	d.h, d.client = h, gos7.NewClient(h)
	d.mu.Unlock()
	return nil
}

// Close implements drivers.Device. A request in progress ends within
// READ_TIMEOUT (gos7 holds its lock while it waits).
func (d *Device) Close() error {
	d.mu.Lock()
	h := d.h
	d.h, d.client = nil, nil
	d.mu.Unlock()
	if h == nil {
		return nil
	}
	return h.Close()
}

var errClosed = errors.New("s7: connection closed")

// isCPUError reports a refusal of the PLC (a missing DB, an address out
// of range): the connection stays usable.
func isCPUError(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "CPU :") }

type block struct {
	area       Area
	db         int
	start, end int   // bytes [start, end)
	tags       []int // indexes into the batch
}

type plan struct{ blocks []*block }

func makePlan(b *drivers.Batch, gap int) *plan {
	var idx []int
	for i, t := range b.Tags {
		if _, ok := t.Addr.(Address); ok {
			idx = append(idx, i)
		}
	}
	addr := func(i int) Address { return b.Tags[i].Addr.(Address) }
	slices.SortStableFunc(idx, func(x, y int) int {
		ax, ay := addr(x), addr(y)
		if ax.Area != ay.Area {
			return int(ax.Area) - int(ay.Area)
		}
		if ax.DB != ay.DB {
			return ax.DB - ay.DB
		}
		return ax.Byte - ay.Byte
	})
	p := &plan{}
	var cur *block
	for _, i := range idx {
		a := addr(i)
		end := a.Byte + size(b.Tags[i], a)
		if cur != nil && cur.area == a.Area && cur.db == a.DB && a.Byte <= cur.end+gap && max(end, cur.end)-cur.start <= maxRead {
			cur.end = max(end, cur.end)
			cur.tags = append(cur.tags, i)
			continue
		}
		cur = &block{area: a.Area, db: a.DB, start: a.Byte, end: end, tags: []int{i}}
		p.blocks = append(p.blocks, cur)
	}
	return p
}

func (d *Device) read(c gos7.Client, area Area, db, start int, buf []byte) error {
	switch area {
	case DB:
		return c.AGReadDB(db, start, len(buf), buf)
	case Merker:
		return c.AGReadMB(start, len(buf), buf)
	case Input:
		return c.AGReadEB(start, len(buf), buf)
	}
	return c.AGReadAB(start, len(buf), buf)
}

func (d *Device) write(c gos7.Client, area Area, db, start int, buf []byte) error {
	switch area {
	case DB:
		return c.AGWriteDB(db, start, len(buf), buf)
	case Merker:
		return c.AGWriteMB(start, len(buf), buf)
	case Input:
		return c.AGWriteEB(start, len(buf), buf)
	}
	return c.AGWriteAB(start, len(buf), buf)
}

// Read implements drivers.Device: one request per run of nearby bytes of
// one area; a run the PLC refuses is split into one request per tag for
// the life of the connection.
func (d *Device) Read(ctx context.Context, b *drivers.Batch) error {
	d.mu.Lock()
	c := d.client
	d.mu.Unlock()
	if c == nil {
		return errClosed
	}
	p, _ := b.Plan.(*plan)
	if p == nil {
		p = makePlan(b, d.cfg.MaxGap)
		b.Plan = p
	}
	for bi := 0; bi < len(p.blocks); bi++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		blk := p.blocks[bi]
		buf := make([]byte, blk.end-blk.start)
		err := d.read(c, blk.area, blk.db, blk.start, buf)
		switch {
		case isCPUError(err) && len(blk.tags) > 1:
			split := append([]*block(nil), p.blocks[:bi]...)
			for _, i := range blk.tags {
				a := b.Tags[i].Addr.(Address)
				split = append(split, &block{area: a.Area, db: a.DB, start: a.Byte, end: a.Byte + size(b.Tags[i], a), tags: []int{i}})
			}
			p.blocks = append(split, p.blocks[bi+1:]...)
			bi--
			continue
		case isCPUError(err):
			a := b.Tags[blk.tags[0]].Addr.(Address)
			b.Results[blk.tags[0]] = drivers.Result{Err: &drivers.TagError{Err: fmt.Errorf("%s: %w", a, err)}}
			continue
		case err != nil:
			return fmt.Errorf("s7: read: %w", err)
		}
		for _, i := range blk.tags {
			t := b.Tags[i]
			a := t.Addr.(Address)
			off := a.Byte - blk.start
			if a.HasBit {
				b.Results[i] = drivers.Result{Value: drivers.BoolValue(buf[off]&(1<<a.Bit) != 0)}
				continue
			}
			v, err := t.Decode(buf[off : off+size(t, a)])
			if err != nil {
				b.Results[i] = drivers.Result{Err: &drivers.TagError{Err: err}}
				continue
			}
			b.Results[i] = drivers.Result{Value: v}
		}
	}
	return nil
}

// Write implements drivers.Device. A bit is written by reading its byte
// and writing it back with the bit changed (gos7's bit write prints to
// stdout): a change the PLC makes to the byte's other bits in between is
// lost.
func (d *Device) Write(ctx context.Context, t *drivers.Tag, v drivers.Value) error {
	a, ok := t.Addr.(Address)
	if !ok {
		return &drivers.TagError{Err: fmt.Errorf("tag %s has no address", t.Name)}
	}
	d.mu.Lock()
	c := d.client
	d.mu.Unlock()
	if c == nil {
		return errClosed
	}
	var buf []byte
	if a.HasBit {
		buf = make([]byte, 1)
		if err := d.read(c, a.Area, a.DB, a.Byte, buf); err != nil {
			return classify(a, err)
		}
		if v.Bool {
			buf[0] |= 1 << a.Bit
		} else {
			buf[0] &^= 1 << a.Bit
		}
	} else {
		var err error
		if buf, err = t.Encode(v); err != nil {
			return &drivers.TagError{Err: err}
		}
	}
	return classify(a, d.write(c, a.Area, a.DB, a.Byte, buf))
}

func classify(a Address, err error) error {
	if isCPUError(err) {
		return &drivers.TagError{Err: fmt.Errorf("%s: %w", a, err)}
	}
	if err != nil {
		return fmt.Errorf("s7: %w", err)
	}
	return nil
}

// Describe names the PLC.
func (c *Config) Describe() string {
	return fmt.Sprintf("%s %s rack %d slot %d", c.Addr, c.CPU, c.Rack, c.Slot)
}
