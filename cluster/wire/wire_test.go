package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"gantry/broker"
	"gantry/broker/packet"
)

func TestMessageRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		m    broker.Message
	}{
		{"plain qos 0", broker.Message{Topic: "plant/line1/temp", Payload: []byte("21.5"), ClientID: "sensor-1"}},
		{"empty payload retained qos 1", broker.Message{Topic: "a", QoS: 1, Retain: true, Origin: broker.OriginLoT}},
		{"every property qos 2", broker.Message{Topic: "req/x", Payload: []byte{0, 1, 2}, QoS: 2, Username: "alice",
			ClientID: "c", PayloadFormat: 1, ContentType: "application/json", ResponseTopic: "resp/x",
			CorrelationData: []byte("corr"), ExpiresAt: 1_800_000_000_000_000_000, Origin: broker.OriginConnector,
			UserProperties: []packet.UserProperty{{Key: "k", Value: "v"}, {Key: "k", Value: "w"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := AppendMessage(nil, &c.m)
			d, err := DecodeMessage(b)
			if err != nil {
				t.Fatal(err)
			}
			if d.SentOrigin != c.m.Origin {
				t.Fatalf("origin %v, want %v", d.SentOrigin, c.m.Origin)
			}
			want := c.m
			want.Origin = broker.OriginPeer
			if len(want.Payload) == 0 {
				want.Payload = nil
			}
			if !reflect.DeepEqual(*d.Msg, want) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", *d.Msg, want)
			}
			for i := range b {
				if _, err := DecodeMessage(b[:i]); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("truncated to %d of %d bytes: %v, want ErrCorrupt", i, len(b), err)
				}
			}
			if _, err := DecodeMessage(append(b, 0)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("trailing byte: %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestFrameRoundTrip(t *testing.T) {
	m1 := AppendMessage(nil, &broker.Message{Topic: "a", Payload: []byte("1")})
	m2 := AppendMessage(nil, &broker.Message{Topic: "b", Payload: []byte("2"), QoS: 1})
	f := AppendHeader(nil, "broker-a", 42, 1)
	f = AppendRecord(f, 0, m1, nil)
	f = AppendRecord(f, 7, m2, []string{"$share/g/b"})
	if got, want := len(f), len(AppendHeader(nil, "broker-a", 42, 1))+RecordSize(0, m1, nil)+RecordSize(7, m2, []string{"$share/g/b"}); got != want {
		t.Fatalf("frame of %d bytes, sizes add up to %d", got, want)
	}
	h, rest, err := ParseHeader(f)
	if err != nil || !reflect.DeepEqual(h, Header{Sender: "broker-a", Boot: 42, Conn: 1}) {
		t.Fatalf("header %+v %v", h, err)
	}
	var recs []Record
	for len(rest) > 0 {
		var rec Record
		if rec, rest, err = NextRecord(rest); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 2 || recs[0].Seq != 0 || recs[1].Seq != 7 || !bytes.Equal(recs[0].Msg, m1) || !bytes.Equal(recs[1].Msg, m2) ||
		recs[0].Groups != nil || !reflect.DeepEqual(recs[1].Groups, []string{"$share/g/b"}) {
		t.Fatalf("records %+v", recs)
	}
}

func TestCorruptRefused(t *testing.T) {
	cases := map[string][]byte{
		"empty":           nil,
		"unknown format":  {1, 1, 'a', 0},
		"no sender":       {Format, 0, 0},
		"length too long": {Format, 200, 'a'},
	}
	for name, b := range cases {
		if _, _, err := ParseHeader(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	msgs := map[string][]byte{
		"qos 3":        {3, 0, 0, 0, 0, 0},
		"unknown flag": {0x10, 0, 0, 0, 0, 0},
		"bad origin":   {0, 0, 0, 0, 9, 0},
		"huge count":   append([]byte{flagProps, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0xff, 0xff, 0x03),
	}
	for name, b := range msgs {
		if _, err := DecodeMessage(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// FuzzDecode: no input makes the decoders panic, and a message that
// decodes encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(AppendRecord(AppendHeader(nil, "n", 1, 1), 3, AppendMessage(nil, &broker.Message{Topic: "t", Payload: []byte("p"), QoS: 1}), []string{"$share/g/t"}))
	f.Add(AppendMessage(nil, &broker.Message{Topic: "t", ContentType: "x", UserProperties: []packet.UserProperty{{Key: "a", Value: "b"}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, rest, err := ParseHeader(b); err == nil {
			for len(rest) > 0 {
				if _, rest, err = NextRecord(rest); err != nil {
					break
				}
			}
		}
		d, err := DecodeMessage(b)
		if err != nil {
			return
		}
		m := *d.Msg
		m.Origin = d.SentOrigin
		again, err := DecodeMessage(AppendRetained(nil, &m, d.Version, d.StoreOnly))
		if err != nil || !reflect.DeepEqual(again, d) {
			t.Fatalf("%x decodes as %+v, which encodes to %+v (%v)", b, *d.Msg, again.Msg, err)
		}
	})
}

func TestFiltersRoundTrip(t *testing.T) {
	b := AppendFilters(nil, InterestSnapshot, []string{"plant/#", "a/+/c", ""})
	op, fs, err := DecodeFilters(b)
	if err != nil || op != InterestSnapshot || !reflect.DeepEqual(fs, []string{"plant/#", "a/+/c", ""}) {
		t.Fatalf("%q %q %v", op, fs, err)
	}
	for i := range b {
		if _, _, err := DecodeFilters(b[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", i, err)
		}
	}
	if _, _, err := DecodeFilters([]byte{'x', 0}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unknown op: %v", err)
	}
}

func TestRetainedVersionRoundTrip(t *testing.T) {
	m := &broker.Message{Topic: "config/line", Payload: []byte("v2"), Retain: true, ContentType: "text/plain"}
	v := Version{Counter: 42, Node: "broker-b"}
	d, err := DecodeMessage(AppendRetained(nil, m, v, true))
	if err != nil || d.Version != v || !d.StoreOnly || d.Msg.ContentType != "text/plain" || string(d.Msg.Payload) != "v2" {
		t.Fatalf("%+v %+v %v", d, d.Msg, err)
	}
	if d, _ := DecodeMessage(AppendMessage(nil, m)); d.Version != (Version{}) || d.StoreOnly {
		t.Fatalf("plain message decoded with %+v", d)
	}
	older := []struct{ a, b Version }{{Version{1, "z"}, Version{2, "a"}}, {Version{2, "a"}, Version{2, "b"}}}
	for _, c := range older {
		if !c.a.Less(c.b) || c.b.Less(c.a) {
			t.Fatalf("%+v should be older than %+v", c.a, c.b)
		}
	}
}

func TestRecordReplicationPart(t *testing.T) {
	msg := AppendMessage(nil, &broker.Message{Topic: "plant/a", Payload: []byte("x"), QoS: 1})
	cases := map[string]Rep{
		"none":     {},
		"copy":     {Copy: true, Partition: 31, Epoch: 7},
		"replay":   {Origin: "broker-b", OriginBoot: 99, OriginSeq: 12, At: 1764633600000000000},
		"fill":     {Copy: true, CopyOnly: true, Partition: 4095, Epoch: 1 << 40, Origin: "n", OriginBoot: 1, OriginSeq: 2, At: 3},
		"qos2":     {Copy: true, Partition: 3, Epoch: 2, PacketID: 65535},
		"copyOnly": {CopyOnly: true},
	}
	for name, rep := range cases {
		t.Run(name, func(t *testing.T) {
			f := AppendRecordRep(nil, 5, msg, []string{"$share/g/plant/a"}, &rep)
			if got, want := len(f), RecordSizeRep(5, msg, []string{"$share/g/plant/a"}, &rep); got != want {
				t.Fatalf("size %d, RecordSizeRep says %d", got, want)
			}
			got, rest, err := NextRecord(f)
			if err != nil || len(rest) != 0 {
				t.Fatalf("NextRecord: %v, %d bytes left", err, len(rest))
			}
			if got.Rep != rep || got.Seq != 5 || string(got.Msg) != string(msg) {
				t.Fatalf("got %+v, want %+v", got.Rep, rep)
			}
		})
	}
	bad := AppendRecordRep(nil, 1, msg, nil, nil)
	bad[len(bad)-1] = 0x80
	if _, _, err := NextRecord(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unknown record flag: %v, want ErrCorrupt", err)
	}
}

func TestHeaderDecisions(t *testing.T) {
	f := AppendHeaderDecided(nil, "broker-a", 42, 300, 99, []uint64{3, 17, 98})
	h, rest, err := ParseHeader(f)
	if err != nil || len(rest) != 0 || !reflect.DeepEqual(h, Header{Sender: "broker-a", Boot: 42, Conn: 300, Decided: 99, Refused: []uint64{3, 17, 98}}) {
		t.Fatalf("header %+v %v", h, err)
	}
	for name, bad := range map[string][]byte{
		"unordered": AppendHeaderDecided(nil, "a", 1, 1, 9, []uint64{5, 5}),
		"truncated": AppendHeaderDecided(nil, "a", 1, 1, 9, []uint64{5, 6})[:8],
		"too many":  append(AppendHeaderDecided(nil, "a", 1, 1, 9, nil)[:6], 0x81, 0x40), // 8193 numbers claimed
	} {
		if _, _, err := ParseHeader(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	rec := AppendRecordRep(nil, 5, []byte("m"), nil, &Rep{Copy: true, Partition: 2, Epoch: 3, Decide: true})
	got, _, err := NextRecord(rec)
	if err != nil || !got.Rep.Decide || !got.Rep.Copy || got.Rep.CopyOnly {
		t.Fatalf("record %+v %v", got, err)
	}
}

// TestPeekMessage: a peek reads what DecodeMessage reads of a message's
// start, and refuses what it refuses there.
func TestPeekMessage(t *testing.T) {
	m := &broker.Message{Topic: "a/b", Payload: []byte("payload"), QoS: 2, ClientID: "pub", Username: "u",
		ContentType: "text/plain", UserProperties: []packet.UserProperty{{Key: "k", Value: "v"}}}
	enc := AppendMessage(nil, m)
	pk, err := PeekMessage(enc)
	if err != nil || pk.QoS != 2 || string(pk.Topic) != "a/b" || string(pk.ClientID) != "pub" || string(pk.Username) != "u" || string(pk.Payload) != "payload" {
		t.Fatalf("peek %+v %v", pk, err)
	}
	for _, bad := range [][]byte{enc[:5], {0x03}, {0x80}} {
		if _, err := PeekMessage(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("peek of %x: %v, want ErrCorrupt", bad, err)
		}
		if _, err := DecodeMessage(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode of %x: %v, want ErrCorrupt", bad, err)
		}
	}
}
