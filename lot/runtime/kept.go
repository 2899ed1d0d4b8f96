package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"gantry/lot/topiccache"
)

// The values of KEEP TOPIC are the state actions keep for themselves (a
// counter, the last mode): they survive a restart in Options.KeptFile, a
// JSON file written atomically (mode 0600) at most once per
// keptSaveEvery after a KEEP, and at Stop. A crash loses at most the
// changes of that interval; a PUBLISH that replaced a kept value since the
// last save may bring the kept value back after a crash (the cache's rule
// "a publish replaces a kept value" is kept in the file at the next save).

const keptSaveEvery = time.Second

// keptRecord is one kept value in the file.
type keptRecord struct {
	Topic   string    `json:"topic"`
	Payload []byte    `json:"payload"` // base64 in JSON
	At      time.Time `json:"at"`
}

type keptFile struct {
	Version int          `json:"version"`
	Kept    []keptRecord `json:"kept"`
}

// loadKept puts the saved kept values into the cache; a file that cannot
// be read is logged and left alone (the next save replaces it).
func (e *Engine) loadKept() {
	if e.o.KeptFile == "" {
		return
	}
	data, err := os.ReadFile(e.o.KeptFile)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var f keptFile
	if err == nil {
		err = json.Unmarshal(data, &f)
		if err == nil && f.Version != 1 {
			err = fmt.Errorf("version %d, want 1", f.Version)
		}
	}
	if err != nil {
		e.log.Error("kept values not restored", "file", e.o.KeptFile, "err", err)
		return
	}
	for _, k := range f.Kept {
		if err := e.cache.Keep(k.Topic, k.Payload, k.At); err != nil {
			e.log.Warn("kept value not restored", "topic", k.Topic, "err", err)
		}
	}
	e.log.Info("kept values restored", "file", e.o.KeptFile, "topics", len(f.Kept))
}

// keptChanged tells the saver that a KEEP TOPIC ran.
func (e *Engine) keptChanged() {
	if e.o.KeptFile == "" {
		return
	}
	select {
	case e.keptWake <- struct{}{}:
	default:
	}
}

// runKeptSaver writes the kept values after a change, at most once per
// keptSaveEvery, and once more when ctx ends.
func (e *Engine) runKeptSaver(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			e.saveKept()
			return
		case <-e.keptWake:
		}
		e.saveKept()
		select {
		case <-ctx.Done():
			e.saveKept()
			return
		case <-time.After(keptSaveEvery):
		}
	}
}

// saveKept writes the cache's kept values to Options.KeptFile.
func (e *Engine) saveKept() {
	f := keptFile{Version: 1, Kept: []keptRecord{}}
	e.cache.Range(func(tp string, v topiccache.Value) bool {
		if v.Origin == topiccache.Kept {
			f.Kept = append(f.Kept, keptRecord{Topic: tp, Payload: v.Payload, At: v.At})
		}
		return true
	})
	data, err := json.Marshal(f)
	if err == nil {
		err = writeFileAtomic(e.o.KeptFile, data)
	}
	if err != nil {
		e.log.Error("kept values not saved", "file", e.o.KeptFile, "err", err)
	}
}

// KeptReplicator is told each value KEEP TOPIC kept on this node, after
// it is in the cache, on the goroutine of the run: it must not block.
type KeptReplicator interface {
	Kept(topic string, payload []byte, at time.Time)
}

// KeptValue is one kept value, as nodes exchange them.
type KeptValue struct {
	Topic   string    `json:"topic"`
	Payload []byte    `json:"payload"`
	At      time.Time `json:"at"`
}

// MergeKept puts a value another node kept into the cache, the later
// write winning (topiccache.Cache.Merge): it reaches no subscriber and
// triggers nothing, and is saved with this node's kept values. It
// reports whether the value was stored.
func (e *Engine) MergeKept(v KeptValue) (bool, error) {
	ok, err := e.cache.Merge(v.Topic, topiccache.Value{Payload: v.Payload, At: v.At, Origin: topiccache.Kept})
	if ok {
		e.keptChanged()
	}
	return ok, err
}

// KeptValues returns every value kept in the cache now.
func (e *Engine) KeptValues() []KeptValue {
	var out []KeptValue
	e.cache.Range(func(tp string, v topiccache.Value) bool {
		if v.Origin == topiccache.Kept {
			out = append(out, KeptValue{Topic: tp, Payload: v.Payload, At: v.At})
		}
		return true
	})
	return out
}
