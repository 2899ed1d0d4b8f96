package interp

import (
	"testing"
	"time"

	"gantry/lot/topiccache"
)

// *topiccache.Cache answers GET TOPIC as it is, for model evaluation.
var _ TopicReader = (*topiccache.Cache)(nil)

// frameHost is how a runtime backs a run with the execution's
// topiccache.Frame: writes are buffered in the frame (and flushed by the
// runtime when the run ends), GET TOPIC reads the frame.
type frameHost struct{ f *topiccache.Frame }

func (h frameHost) Publish(topic string, payload []byte, _ bool, _ byte) error {
	h.f.Publish(topic, payload)
	return nil
}

func (h frameHost) Keep(topic string, payload []byte) error {
	h.f.Keep(topic, payload)
	return nil
}

func (h frameHost) Lookup(topic string) ([]byte, bool) {
	p, src := h.f.Get(topic)
	return p, src != topiccache.NotFound
}

// TestFrameOrder checks LOT.md §4.5 through a real Frame: GET TOPIC sees
// this run's own pending writes first, then the trigger message on its
// own topic, then the cache.
func TestFrameOrder(t *testing.T) {
	cache, err := topiccache.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for topic, v := range map[string]string{"count": "5", "in/a": "old", "other": "o"} {
		if err := cache.Publish(topic, []byte(v), now); err != nil {
			t.Fatal(err)
		}
	}
	f := topiccache.NewFrame(cache, nil)
	f.SetTrigger("in/a", []byte("new"))
	fh := frameHost{f}
	d := deploy(t, onMsg+`    PUBLISH TOPIC "count" WITH GET TOPIC "count" + 1
    SET "c" WITH GET TOPIC "count"
    SET "t" WITH GET TOPIC "in/a"
    SET "o" WITH GET TOPIC "other"
    KEEP TOPIC "seen" WITH {c} + " " + {t} + " " + {o}
`, nil)
	if err := d.reg.programs["T"].Run(&Host{Effects: fh, Topics: fh}, &Event{Topic: "in/a", Payload: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range f.Writes() {
		got = append(got, w.Topic+"="+string(w.Payload))
	}
	if err := sameList(got, []string{"count=6", "seen=6 new o"}); err != nil {
		t.Error(err)
	}
}
