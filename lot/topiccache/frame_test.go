package topiccache

import "testing"

type retained map[string]string

func (r retained) Retained(topic string) ([]byte, bool) {
	v, ok := r[topic]
	return []byte(v), ok
}

func TestFrameOrder(t *testing.T) {
	c := newCache(t, nil)
	_ = c.Publish("trig", []byte("cache-newer"), t0)
	_ = c.Publish("cached", []byte("c"), t0)
	f := NewFrame(c, retained{"ret": "r", "cached": "old"})
	f.SetTrigger("trig", []byte("trigger"))
	type want struct {
		val string
		src Source
	}
	check := func(step, topic string, w want) {
		t.Helper()
		v, src := f.Get(topic)
		if string(v) != w.val || src != w.src {
			t.Fatalf("%s: Get(%s) = %q from %v, want %q from %v", step, topic, v, src, w.val, w.src)
		}
	}
	check("trigger before cache", "trig", want{"trigger", FromTrigger})
	check("cache before retained", "cached", want{"c", FromCache})
	check("retained last", "ret", want{"r", FromRetained})
	check("unknown", "none", want{"", NotFound})

	f.Keep("trig", []byte("kept"))
	f.Publish("cached", []byte("p1"))
	f.Publish("cached", []byte("p2"))
	check("pending before trigger", "trig", want{"kept", FromPending})
	check("latest pending write", "cached", want{"p2", FromPending})
	if string(mustGet(c, "cached")) != "c" {
		t.Fatal("buffered writes reached the cache before the flush")
	}
	ws := f.Writes()
	if len(ws) != 3 || !ws[0].Keep || ws[1].Keep || string(ws[2].Payload) != "p2" {
		t.Fatalf("Writes = %+v", ws)
	}
	f.Reset()
	check("after reset", "trig", want{"cache-newer", FromCache})
	if len(f.Writes()) != 0 {
		t.Fatal("Reset kept writes")
	}
	if v, src := NewFrame(nil, nil).Get("x"); v != nil || src != NotFound {
		t.Fatal("a frame without sources found something")
	}
}

func mustGet(c *Cache, topic string) []byte {
	v, _ := c.Get(topic)
	return v.Payload
}
