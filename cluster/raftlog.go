package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// raftQuiet are hashicorp/raft warnings that are normal in Gantry's
// start-up and failover and go to debug level: a fresh node has no peers
// until it is added, and a follower catching up is sent older entries.
var raftQuiet = []string{
	"raft: no known peers, aborting election",
	"raft: failed to get previous log",
	"raft: appendEntries rejected, sending older logs",
}

// raftLogWindow is how often one repeated library message is logged: a
// dead peer makes hashicorp/raft report a failed heartbeat many times a
// second.
const raftLogWindow = 10 * time.Second

// newRaftLogger returns an hclog.Logger for hashicorp/raft that writes to
// log (which names the component and node), with the library's info lines at debug level (our own code logs the
// transitions an operator reads) and each repeated message at most once a
// raftLogWindow, with the count of those it held back.
func newRaftLogger(log *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:            "raft",
		Level:           hclog.Info,
		Output:          &raftLogWriter{log: log, seen: map[string]*repeat{}},
		DisableTime:     true,
		IncludeLocation: false,
	})
}

type repeat struct {
	at   time.Time
	held int
}

// raftLogWriter turns hclog's text lines ("[WARN]  raft: message: k=v")
// into slog records.
type raftLogWriter struct {
	log  *slog.Logger
	mu   sync.Mutex         // guards seen
	seen map[string]*repeat // message text → when last logged
}

func (w *raftLogWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	level, msg := slog.LevelDebug, line
	for _, l := range []struct {
		tag   string
		level slog.Level
	}{{"[ERROR]", slog.LevelWarn}, {"[WARN]", slog.LevelWarn}, {"[INFO]", slog.LevelDebug}, {"[DEBUG]", slog.LevelDebug}, {"[TRACE]", slog.LevelDebug}} {
		if rest, ok := bytes.CutPrefix([]byte(line), []byte(l.tag)); ok {
			level, msg = l.level, string(bytes.TrimSpace(rest))
			break
		}
	}
	for _, q := range raftQuiet {
		if strings.HasPrefix(msg, q) {
			level = slog.LevelDebug
		}
	}
	if strings.HasPrefix(msg, "raft: heartbeat timeout reached, starting election") {
		level = slog.LevelInfo // how every election starts, a new cluster's first included
	}
	key := msg
	if i := bytes.IndexByte([]byte(msg), ':'); i > 0 && i+1 < len(msg) {
		// "raft: failed to heartbeat to: peer=..." → one key per message kind.
		if j := bytes.IndexByte([]byte(msg[i+1:]), ':'); j > 0 {
			key = msg[:i+1+j]
		}
	}
	now := time.Now()
	w.mu.Lock()
	r := w.seen[key]
	if r != nil && now.Sub(r.at) < raftLogWindow {
		r.held++
		w.mu.Unlock()
		return len(p), nil
	}
	held := 0
	if r != nil {
		held = r.held
	}
	if len(w.seen) > 256 {
		clear(w.seen)
	}
	w.seen[key] = &repeat{at: now}
	w.mu.Unlock()
	var attrs []slog.Attr
	if held > 0 {
		attrs = append(attrs, slog.Int("repeated", held))
	}
	w.log.LogAttrs(context.Background(), level, msg, attrs...)
	return len(p), nil
}
