package packet_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"gantry/broker/packet"
	"gantry/broker/packet/packettest"
)

// FuzzDecode feeds arbitrary bytes through DecodeFixedHeader and Decode in
// v3.1.1 and v5. Decoding must never panic, and a packet that decodes must
// re-encode to exactly Size bytes that decode to an equal packet.
func FuzzDecode(f *testing.F) {
	for _, fx := range packettest.Fixtures {
		f.Add(fx.Wire)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, n, err := packet.DecodeFixedHeader(data)
		if err != nil {
			return
		}
		body := data[n:]
		if len(body) > h.Remaining {
			body = body[:h.Remaining]
		}
		for _, v := range []packet.Version{packet.V311, packet.V5} {
			p, err := packet.Decode(h, body, v)
			if err != nil {
				continue
			}
			checkReencoding(t, p, v)
		}
	})
}

func checkReencoding(t *testing.T, p any, v packet.Version) {
	t.Helper()
	wire := packettest.Encode(p, v)
	if size := packettest.Size(p, v); size != len(wire) {
		t.Fatalf("v%d %#v: Size %d, encoded %d bytes", v, p, size, len(wire))
	}
	again, err := packettest.DecodeWire(wire, v)
	if err != nil {
		t.Fatalf("v%d: re-encoded %#v as % X, which fails: %v", v, p, wire, err)
	}
	if !reflect.DeepEqual(p, again) {
		t.Fatalf("v%d: round trip changed the packet\nfirst  %#v\nsecond %#v\nwire % X", v, p, again, wire)
	}
}

var updateFuzzCorpus = flag.Bool("update-fuzz-corpus", false,
	"rewrite testdata/fuzz/FuzzDecode from packettest.Fixtures")

const fuzzCorpusDir = "testdata/fuzz/FuzzDecode"

// corpusFile renders data in the "go test fuzz v1" corpus format.
func corpusFile(data []byte) []byte {
	return []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n")
}

// corpusFileName turns a fixture name into a stable file name.
func corpusFileName(fixture string) string {
	return "fixture-" + strings.ReplaceAll(fixture, "/", "-")
}

// TestFuzzCorpusMatchesFixtures checks that the committed seed corpus holds
// every fixture's wire bytes; with -update-fuzz-corpus it rewrites them.
func TestFuzzCorpusMatchesFixtures(t *testing.T) {
	if *updateFuzzCorpus {
		writeFuzzCorpus(t)
	}
	for _, fx := range packettest.Fixtures {
		path := filepath.Join(fuzzCorpusDir, corpusFileName(fx.Name))
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (run go generate ./broker/packet/)", err)
			continue
		}
		if !bytes.Equal(got, corpusFile(fx.Wire)) {
			t.Errorf("%s is stale (run go generate ./broker/packet/)", path)
		}
	}
}

func writeFuzzCorpus(t *testing.T) {
	old, _ := filepath.Glob(filepath.Join(fuzzCorpusDir, "fixture-*"))
	for _, path := range old {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(fuzzCorpusDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, fx := range packettest.Fixtures {
		path := filepath.Join(fuzzCorpusDir, corpusFileName(fx.Name))
		if err := os.WriteFile(path, corpusFile(fx.Wire), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
