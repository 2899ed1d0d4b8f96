package modbus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	gmb "github.com/goburrow/modbus"
	"github.com/goburrow/serial"

	"gantry/drivers"
)

// Area is a Modbus data table.
type Area uint8

// The four tables.
const (
	Holding Area = iota + 1
	Input
	Coil
	Discrete
)

var areaNames = []string{"HOLDING_REGISTER", "INPUT_REGISTER", "COIL", "DISCRETE_INPUT"}
var areaAliases = map[string]string{"HOLDING": "HOLDING_REGISTER", "HOLDING_REGISTERS": "HOLDING_REGISTER", "HR": "HOLDING_REGISTER",
	"INPUT": "INPUT_REGISTER", "INPUT_REGISTERS": "INPUT_REGISTER", "IR": "INPUT_REGISTER", "COILS": "COIL",
	"DISCRETE": "DISCRETE_INPUT", "DISCRETE_INPUTS": "DISCRETE_INPUT", "DI": "DISCRETE_INPUT"}

func (a Area) bits() bool { return a == Coil || a == Discrete }

func (a Area) String() string { return areaNames[a-1] }

// Address is a tag's place on the device: its table and 0-based number.
type Address struct {
	Area  Area
	Start uint16
	Count uint16 // registers or bits
}

// Config is MODBUS_CONFIG.
type Config struct {
	Serial         bool
	Addr           string // host:port (TCP)
	Port           serial.Config
	SlaveID        byte
	ConnectTimeout time.Duration
	ReadTimeout    time.Duration
	WriteTimeout   time.Duration
	MaxRegisters   int // registers in one read request
	MaxGap         int // unused registers a read may span to merge two tags
}

// Protocol-wide bounds (Modbus application protocol 1.1b3).
const (
	maxReadRegisters = 125
	maxReadBits      = 2000
)

// Parse reads MODBUS_CONFIG and each tag's ADDRESS and ADDRESS_TYPE of a
// MODBUS_TCP or MODBUS_SERIAL connector.
func Parse(s *drivers.Spec) *Config {
	c := &Config{Serial: s.Type == "MODBUS_SERIAL"}
	cs := s.Config
	if cs == nil {
		return c
	}
	c.SlaveID = byte(cs.Int("SLAVE_ID", cs.Int("UNIT_ID", 1, 0, 255), 0, 255))
	c.ConnectTimeout = cs.Millis("CONNECTION_TIMEOUT", 5*time.Second, 10, 600_000)
	c.ReadTimeout = cs.Millis("READ_TIMEOUT", time.Second, 10, 600_000)
	c.WriteTimeout = cs.Millis("WRITE_TIMEOUT", c.ReadTimeout, 10, 600_000)
	c.MaxRegisters = cs.Int("MAX_REGISTERS", maxReadRegisters, 1, maxReadRegisters)
	c.MaxGap = cs.Int("MAX_GAP", 0, 0, maxReadRegisters)
	cs.Has("RETRY_COUNT") // accepted: the engine redials with backoff after any error
	cs.Has("RETRY_DELAY")
	if c.Serial {
		parseSerial(cs, c)
	} else {
		host := cs.String("HOST", cs.String("IP", ""))
		if host == "" {
			cs.Errorf(cs.Block.KindPos, "%s needs WITH HOST \"<address of the device>\"", cs.Where())
		}
		c.Addr = net.JoinHostPort(host, strconv.Itoa(cs.Int("PORT", 502, 1, 65535)))
	}
	for _, t := range s.Tags() {
		parseTag(t, c)
	}
	return c
}

// parseSerial reads the serial line. Every parameter is explicit in the
// result: goburrow/serial takes an empty parity for Even.
func parseSerial(cs *drivers.Settings, c *Config) {
	c.Port.Address = cs.String("PORT", cs.String("SERIAL_PORT", cs.String("DEVICE", "")))
	if c.Port.Address == "" {
		cs.Errorf(cs.Block.KindPos, "%s needs WITH PORT \"/dev/ttyUSB0\" (the serial device)", cs.Where())
	}
	c.Port.BaudRate = cs.Int("BAUD_RATE", 19200, 50, 4_000_000)
	c.Port.DataBits = cs.Int("DATA_BITS", 8, 5, 8)
	c.Port.StopBits = cs.Int("STOP_BITS", 1, 1, 2)
	c.Port.Parity = map[string]string{"NONE": "N", "EVEN": "E", "ODD": "O"}[cs.OneOf("PARITY", "NONE",
		[]string{"NONE", "EVEN", "ODD"}, map[string]string{"N": "NONE", "E": "EVEN", "O": "ODD"})]
	c.Port.Timeout = c.ReadTimeout
}

func parseTag(t *drivers.Tag, c *Config) {
	ts := t.Settings
	area := Area(slices.Index(areaNames, ts.OneOf("ADDRESS_TYPE", "HOLDING_REGISTER", areaNames, areaAliases)) + 1)
	p := ts.Pair("ADDRESS")
	if p == nil {
		ts.Errorf(ts.Block.KindPos, "%s needs WITH ADDRESS \"<register number, from 0>\"", ts.Where())
		return
	}
	n := ts.Int("ADDRESS", 0, 0, 65535)
	a := Address{Area: area, Start: uint16(n), Count: uint16(t.Words())}
	if area.bits() {
		a.Count = 1
		if t.Type != drivers.Bool {
			ts.Errorf(p.Value().Pos, "%s is a %s: its DATA_TYPE must be BOOL", ts.Where(), area)
		}
	}
	if int(a.Start)+int(a.Count) > 65536 {
		ts.Errorf(p.Value().Pos, "%s: %d registers from %d go past 65535", ts.Where(), a.Count, a.Start)
	}
	if int(a.Count) > maxReadRegisters {
		ts.Errorf(p.Value().Pos, "%s: %d registers, more than one request reads (%d)", ts.Where(), a.Count, maxReadRegisters)
	}
	if t.Writable && (area == Input || area == Discrete) {
		ts.Errorf(ts.Pair("WRITABLE").Value().Pos, "%s is a %s, which Modbus cannot write", ts.Where(), area)
	}
	t.Addr = a
}

// Device is a Modbus TCP or RTU device.
type Device struct {
	cfg    *Config
	tcp    *tcpTransport
	rtu    *rtuTransport
	client gmb.Client
}

// New makes the device of a parsed configuration.
func New(c *Config) *Device {
	d := &Device{cfg: c}
	if c.Serial {
		h := gmb.NewRTUClientHandler(c.Port.Address)
		h.SlaveId = c.SlaveID
		d.rtu = &rtuTransport{cfg: c.Port, frameDelay: frameDelay(c.Port.BaudRate)}
		d.client = gmb.NewClient2(h, d.rtu)
	} else {
		h := gmb.NewTCPClientHandler(c.Addr)
		h.SlaveId = c.SlaveID
		d.tcp = &tcpTransport{timeout: c.ReadTimeout}
		d.client = gmb.NewClient2(h, d.tcp)
	}
	return d
}

// frameDelay is 3.5 characters of 11 bits (1.75 ms above 19200 Bd).
func frameDelay(baud int) time.Duration {
	if baud > 19200 {
		return 1750 * time.Microsecond
	}
	return time.Duration(38_500_000/baud) * time.Microsecond
}

// Open implements drivers.Device.
func (d *Device) Open(ctx context.Context) error {
	if d.rtu != nil {
		return d.rtu.open()
	}
	return d.tcp.dial(ctx, d.cfg.Addr, d.cfg.ConnectTimeout)
}

// Close implements drivers.Device.
func (d *Device) Close() error {
	if d.rtu != nil {
		return d.rtu.close()
	}
	return d.tcp.close()
}

// interrupt closes a TCP socket when ctx ends, so that Stop never waits
// for a request's timeout. A serial request ends within its timeout.
func (d *Device) interrupt(ctx context.Context) func() bool {
	if d.tcp == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(ctx, func() { d.tcp.close() })
}

// block is one read request covering one or more tags.
type block struct {
	area  Area
	start uint16
	count uint16
	tags  []int // indexes into the batch
}

type plan struct{ blocks []*block }

// makePlan merges tags of the same table whose registers are adjacent
// (or at most MaxGap apart) into one request of at most MaxRegisters.
func (d *Device) makePlan(b *drivers.Batch) *plan {
	idx := make([]int, 0, len(b.Tags))
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
		return int(ax.Start) - int(ay.Start)
	})
	p := &plan{}
	var cur *block
	for _, i := range idx {
		a := addr(i)
		limit := d.cfg.MaxRegisters
		if a.Area.bits() {
			limit = maxReadBits
		}
		if cur != nil && cur.area == a.Area && int(a.Start) <= int(cur.start)+int(cur.count)+d.cfg.MaxGap {
			end := max(int(cur.start)+int(cur.count), int(a.Start)+int(a.Count))
			if end-int(cur.start) <= limit {
				cur.count = uint16(end - int(cur.start))
				cur.tags = append(cur.tags, i)
				continue
			}
		}
		cur = &block{area: a.Area, start: a.Start, count: a.Count, tags: []int{i}}
		p.blocks = append(p.blocks, cur)
	}
	return p
}

// Read implements drivers.Device: one request per block. A block the
// device refuses (an exception: a wrong address among its tags) is split
// into one block per tag for good, so that only the wrong tag fails.
func (d *Device) Read(ctx context.Context, b *drivers.Batch) error {
	p, _ := b.Plan.(*plan)
	if p == nil {
		p = d.makePlan(b)
		b.Plan = p
	}
	stop := d.interrupt(ctx)
	defer stop()
	d.setTimeout(d.cfg.ReadTimeout)
	for bi := 0; bi < len(p.blocks); bi++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		blk := p.blocks[bi]
		data, err := d.readBlock(blk)
		var mbe *gmb.ModbusError
		switch {
		case errors.As(err, &mbe) && len(blk.tags) > 1:
			split := make([]*block, 0, len(p.blocks)+len(blk.tags))
			split = append(split, p.blocks[:bi]...)
			for _, i := range blk.tags {
				a := b.Tags[i].Addr.(Address)
				split = append(split, &block{area: a.Area, start: a.Start, count: a.Count, tags: []int{i}})
			}
			p.blocks = append(split, p.blocks[bi+1:]...)
			bi--
			continue
		case errors.As(err, &mbe):
			b.Results[blk.tags[0]] = drivers.Result{Err: &drivers.TagError{Err: fmt.Errorf("%s %d: %w", blk.area, blk.start, err)}}
			continue
		case err != nil:
			return err
		}
		for _, i := range blk.tags {
			b.Results[i] = decode(b.Tags[i], blk, data)
		}
	}
	return nil
}

// setTimeout sets the next requests' timeout. A serial port keeps the
// timeout it was opened with (READ_TIMEOUT).
func (d *Device) setTimeout(t time.Duration) {
	if d.tcp != nil {
		d.tcp.timeout = t
	}
}

// readBlock reads one block and checks the reply's size: a short reply is
// never decoded (goburrow does not check the byte count).
func (d *Device) readBlock(blk *block) ([]byte, error) {
	var data []byte
	var err error
	switch blk.area {
	case Holding:
		data, err = d.client.ReadHoldingRegisters(blk.start, blk.count)
	case Input:
		data, err = d.client.ReadInputRegisters(blk.start, blk.count)
	case Coil:
		data, err = d.client.ReadCoils(blk.start, blk.count)
	case Discrete:
		data, err = d.client.ReadDiscreteInputs(blk.start, blk.count)
	}
	if err != nil {
		return nil, err
	}
	want := 2 * int(blk.count)
	if blk.area.bits() {
		want = (int(blk.count) + 7) / 8
	}
	if len(data) != want {
		return nil, fmt.Errorf("modbus: %s %d x%d: reply of %d bytes, want %d", blk.area, blk.start, blk.count, len(data), want)
	}
	return data, nil
}

func decode(t *drivers.Tag, blk *block, data []byte) drivers.Result {
	a := t.Addr.(Address)
	off := int(a.Start - blk.start)
	if blk.area.bits() {
		return drivers.Result{Value: drivers.BoolValue(data[off/8]&(1<<(off%8)) != 0)}
	}
	v, err := t.Decode(data[2*off : 2*(off+int(a.Count))])
	if err != nil {
		return drivers.Result{Err: &drivers.TagError{Err: err}}
	}
	return drivers.Result{Value: v}
}

// Write implements drivers.Device: FC 5 for a coil, FC 6 for one
// register, FC 16 for more.
func (d *Device) Write(ctx context.Context, t *drivers.Tag, v drivers.Value) error {
	a, ok := t.Addr.(Address)
	if !ok {
		return &drivers.TagError{Err: fmt.Errorf("tag %s has no address", t.Name)}
	}
	stop := d.interrupt(ctx)
	defer stop()
	d.setTimeout(d.cfg.WriteTimeout)
	var err error
	switch a.Area {
	case Coil:
		val := uint16(0)
		if v.Bool {
			val = 0xFF00
		}
		_, err = d.client.WriteSingleCoil(a.Start, val)
	case Holding:
		var b []byte
		if b, err = t.Encode(v); err != nil {
			return &drivers.TagError{Err: err}
		}
		if len(b) == 2 {
			_, err = d.client.WriteSingleRegister(a.Start, uint16(b[0])<<8|uint16(b[1]))
		} else {
			_, err = d.client.WriteMultipleRegisters(a.Start, uint16(len(b)/2), b)
		}
	default:
		return &drivers.TagError{Err: fmt.Errorf("tag %s: a %s cannot be written", t.Name, a.Area)}
	}
	var mbe *gmb.ModbusError
	if errors.As(err, &mbe) {
		return &drivers.TagError{Err: fmt.Errorf("%s %d: %w", a.Area, a.Start, err)}
	}
	return err
}

// Describe names the device in status and logs.
func (c *Config) Describe() string {
	if c.Serial {
		return fmt.Sprintf("%s %d %d%s%d slave %d", c.Port.Address, c.Port.BaudRate, c.Port.DataBits, c.Port.Parity, c.Port.StopBits, c.SlaveID)
	}
	return fmt.Sprintf("%s slave %d", c.Addr, c.SlaveID)
}
