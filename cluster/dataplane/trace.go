package dataplane

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// TraceEvent is one line of the replication trace (Cluster.ReplicationTrace):
// what happened to one QoS 1/2 record on this node.
type TraceEvent struct {
	Time time.Time `json:"time"`
	// Event: "publish" (a client's publish entered here and was written),
	// "acknowledged" (its majority confirmed), "refused" (Reason says why),
	// "copy" (a copy of another node's record stored here), "staleCopy"
	// (refused: written in an epoch that is over), "replay" (re-delivered
	// here for a lost node).
	Event     string   `json:"event"`
	Client    string   `json:"client,omitempty"`
	Topic     string   `json:"topic,omitempty"`
	QoS       byte     `json:"qos,omitempty"`
	Partition uint32   `json:"partition"`
	Epoch     uint64   `json:"epoch,omitempty"`
	Origin    string   `json:"origin,omitempty"` // the node the record entered
	Seq       uint64   `json:"seq,omitempty"`    // its number in the origin's stream
	Copies    []string `json:"copies,omitempty"` // the other copies it went to
	Millis    float64  `json:"ms,omitempty"`     // publish to answer
	Reason    string   `json:"reason,omitempty"`
}

// Trace configures the replication trace.
type Trace struct {
	Dir      string // DataDir/replication/trace
	MaxBytes int64  // ReplicationTraceMaxMegabytes: the oldest files go beyond it
}

const (
	traceQueue    = 8192    // events waiting for the writer; beyond it they are dropped, counted
	traceFileMin  = 1 << 20 // a file holds at least this much before the next starts
	traceFilesMax = 8       // files the cap is spread over
	tracePrefix   = "trace-"
	traceSuffix   = ".jsonl"
)

// tracer writes trace events as JSON lines, one goroutine, files rotated
// and the oldest deleted to keep under the cap.
type tracer struct {
	opts    Trace
	ch      chan TraceEvent
	dropped atomic.Uint64
	done    chan struct{}

	mu sync.Mutex // guards the files between the writer and Read

	cmu    sync.RWMutex // guards closed against event's send
	closed bool
}

func newTracer(opts Trace) (*tracer, error) {
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("dataplane: trace: %w", err)
	}
	t := &tracer{opts: opts, ch: make(chan TraceEvent, traceQueue), done: make(chan struct{})}
	go t.run()
	return t, nil
}

// event queues e; it never blocks.
func (t *tracer) event(e TraceEvent) {
	if t == nil {
		return
	}
	e.Time = time.Now()
	t.cmu.RLock()
	defer t.cmu.RUnlock()
	if t.closed {
		return
	}
	select {
	case t.ch <- e:
	default:
		t.dropped.Add(1)
	}
}

func (t *tracer) close() {
	if t == nil {
		return
	}
	t.cmu.Lock()
	if !t.closed {
		t.closed = true
		close(t.ch)
	}
	t.cmu.Unlock()
	<-t.done
}

func (t *tracer) fileSize() int64 { return max(t.opts.MaxBytes/traceFilesMax, traceFileMin) }

func (t *tracer) run() {
	defer close(t.done)
	var f *os.File
	var w *bufio.Writer
	var size int64
	flush := func() {
		if w != nil {
			t.mu.Lock()
			w.Flush()
			t.mu.Unlock()
		}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	defer func() {
		flush()
		if f != nil {
			f.Close()
		}
	}()
	for {
		select {
		case e, ok := <-t.ch:
			if !ok {
				return
			}
			if f == nil || size >= t.fileSize() {
				flush()
				if f != nil {
					f.Close()
				}
				var err error
				name := filepath.Join(t.opts.Dir, fmt.Sprintf("%s%020d%s", tracePrefix, time.Now().UnixNano(), traceSuffix))
				if f, err = os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
					f, w = nil, nil
					t.dropped.Add(1)
					continue
				}
				w, size = bufio.NewWriterSize(f, 64<<10), 0
				t.prune()
			}
			line, _ := json.Marshal(e)
			t.mu.Lock()
			n, _ := w.Write(append(line, '\n'))
			t.mu.Unlock()
			size += int64(n)
		case <-tick.C:
			flush()
		}
	}
}

// files lists the trace files, oldest first.
func (t *tracer) files() []string {
	ents, _ := os.ReadDir(t.opts.Dir)
	var out []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, tracePrefix) && strings.HasSuffix(n, traceSuffix) {
			out = append(out, filepath.Join(t.opts.Dir, n))
		}
	}
	slices.Sort(out)
	return out
}

// prune deletes the oldest files while all of them exceed the cap.
func (t *tracer) prune() {
	files := t.files()
	var total int64
	sizes := make([]int64, len(files))
	for i, f := range files {
		if st, err := os.Stat(f); err == nil {
			sizes[i] = st.Size()
			total += sizes[i]
		}
	}
	for i := 0; i < len(files)-1 && total > t.opts.MaxBytes; i++ {
		os.Remove(files[i])
		total -= sizes[i]
	}
}

// TraceFilter selects trace lines for Read.
type TraceFilter struct {
	Client, Topic string
	Partition     int // -1: any
	Limit         int // the newest lines kept
}

// ReadTrace writes the newest trace lines that match f to w, oldest
// first; it fails when the trace is off.
func (p *Plane) ReadTrace(w io.Writer, f TraceFilter) error {
	t := p.trace
	if t == nil {
		return ErrTraceOff
	}
	t.mu.Lock() // lines written so far are in the files
	files := t.files()
	t.mu.Unlock()
	var keep [][]byte
	for i := len(files) - 1; i >= 0 && len(keep) < f.Limit; i-- {
		data, err := os.ReadFile(files[i])
		if err != nil {
			continue
		}
		lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
		for j := len(lines) - 1; j >= 0 && len(keep) < f.Limit; j-- {
			if len(lines[j]) > 0 && f.match(lines[j]) {
				keep = append(keep, lines[j])
			}
		}
	}
	for i := len(keep) - 1; i >= 0; i-- {
		if _, err := w.Write(append(keep[i], '\n')); err != nil {
			return err
		}
	}
	return nil
}

func (f TraceFilter) match(line []byte) bool {
	if f.Client == "" && f.Topic == "" && f.Partition < 0 {
		return true
	}
	var e TraceEvent
	if json.Unmarshal(line, &e) != nil {
		return false
	}
	return (f.Client == "" || e.Client == f.Client) && (f.Topic == "" || e.Topic == f.Topic) &&
		(f.Partition < 0 || int(e.Partition) == f.Partition)
}

// ErrTraceOff answers ReadTrace when Cluster.ReplicationTrace is off.
var ErrTraceOff = fmt.Errorf("dataplane: the replication trace is off (Cluster.ReplicationTrace)")
