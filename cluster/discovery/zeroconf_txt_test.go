package discovery

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/grandcat/zeroconf"

	"gantry/cluster/signing"
)

func TestClusterTXT(t *testing.T) {
	s := signing.New([]byte("secret"), nil)
	f := txtFields{ClusterID: "line-1", NodeName: "gw-1", RaftAddr: ":9200", OpsAddr: ":9100"}
	txt, err := clusterTXT(s, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(txt) != 6 || txt[0] != "v=1" || !strings.HasPrefix(txt[5], "sig=") {
		t.Fatalf("TXT %q", txt)
	}
	for _, tc := range []struct {
		name string
		txt  []string
		want error // of parse or signature check
	}{
		{"as sent", txt, nil},
		{"any order", []string{txt[5], txt[3], txt[1], txt[0], txt[4], txt[2]}, nil},
		{"first of a duplicate key wins", append(slices.Clone(txt), "node=gw-9"), nil},
		{"value changed", replaceTXT(txt, "raft=:9200", "raft=:9999"), signing.ErrBadSignature},
		{"key duplicated ahead", append([]string{"node=gw-9"}, txt...), signing.ErrBadSignature},
		{"signature removed", txt[:5], signing.ErrUnsigned},
		{"signature not base64", replaceTXT(txt, txt[5], "sig=!!"), errTXT},
		{"no version", txt[1:], errTXT},
		{"no raft address", replaceTXT(txt, "raft=:9200", "raft="), errTXT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, sig, err := parseTXT(tc.txt)
			if err == nil {
				err = s.CheckSum(got.canonical(), sig)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if err == nil && got != f {
				t.Fatalf("fields %+v, want %+v", got, f)
			}
		})
	}
	if _, err := clusterTXT(s, txtFields{ClusterID: strings.Repeat("c", 250), NodeName: "n", RaftAddr: ":1"}); err == nil {
		t.Fatal("a TXT string over 255 bytes was accepted")
	}
}

func replaceTXT(txt []string, old, repl string) []string {
	out := slices.Clone(txt)
	out[slices.Index(out, old)] = repl
	return out
}

// FuzzParseTXT checks that parsing never panics and that what it accepts
// survives a round trip through clusterTXT. The input is the TXT strings
// separated by NUL bytes.
func FuzzParseTXT(f *testing.F) {
	s := signing.New([]byte("fuzz"), nil)
	txt, _ := clusterTXT(s, txtFields{ClusterID: "line-1", NodeName: "gw-1", RaftAddr: ":9200", OpsAddr: "10.0.0.1:9100"})
	f.Add(strings.Join(txt, "\x00"))
	f.Add("v=1\x00cluster=c\x00node=n\x00raft=:1")
	f.Add("v=1\x00V=2\x00sig=")
	f.Fuzz(func(t *testing.T, in string) {
		fields, sig, err := parseTXT(strings.Split(in, "\x00"))
		if err != nil {
			return
		}
		if sig != nil && len(sig) == 0 {
			t.Fatal("empty signature accepted")
		}
		again, err := clusterTXT(nil, fields)
		if err != nil {
			return // a value too long for one TXT string once prefixed
		}
		if back, _, err := parseTXT(again); err != nil || back != fields {
			t.Fatalf("round trip of %+v = %+v, %v", fields, back, err)
		}
	})
}

func TestZeroconfConsider(t *testing.T) {
	secret := signing.New([]byte("secret"), nil)
	rec, log := newLogRecorder()
	z, err := NewZeroconf(ZeroconfOptions{ClusterID: "line-1", NodeName: "gw-1", RaftAddr: ":9200", OpsAddr: ":9100", Signer: secret, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	_, lan, _ := net.ParseCIDR("10.7.2.1/24")
	nets := []*net.IPNet{lan}
	entry := func(s *signing.Signer, f txtFields, addrs ...string) *zeroconf.ServiceEntry {
		txt, err := clusterTXT(s, f)
		if err != nil {
			t.Fatal(err)
		}
		e := zeroconf.NewServiceEntry(instanceName(f.NodeName), ClusterService, mdnsDomain)
		e.Text = txt
		e.AddrIPv4 = ips(addrs...)
		return e
	}
	// gw-2 has two NICs; the address in our subnet is chosen.
	z.consider(entry(secret, txtFields{"line-1", "gw-2", ":9200", ":9100"}, "10.7.1.2", "10.7.2.2"), nets)
	// gw-3 gives its host explicitly.
	z.consider(entry(secret, txtFields{"line-1", "gw-3", "gw-3.plant.example:9300", ""}, "10.7.2.3"), nets)
	// gw-4 is in no subnet of ours: its first address.
	z.consider(entry(secret, txtFields{"line-1", "gw-4", ":9200", ""}, "192.168.9.4", "192.168.8.4"), nets)
	for range 10 {
		z.consider(entry(signing.New([]byte("other"), nil), txtFields{"line-1", "evil", ":9200", ""}, "10.7.2.66"), nets)
		z.consider(entry(nil, txtFields{"line-1", "unsigned", ":9200", ""}, "10.7.2.67"), nets)
		z.consider(entry(secret, txtFields{"line-2", "neighbour", ":9200", ""}, "10.7.2.68"), nets)
	}
	z.consider(entry(secret, txtFields{"line-1", "gw-1", ":9200", ""}, "10.7.2.1"), nets) // a node using our name
	z.consider(entry(secret, txtFields{"line-1", "gw-5", ":9200", ""}), nets)             // no address yet

	peers, _ := z.Peers(t.Context())
	want := []Peer{
		{NodeName: "gw-2", ClusterID: "line-1", RaftAddr: "10.7.2.2:9200", OpsAddr: "10.7.2.2:9100"},
		{NodeName: "gw-3", ClusterID: "line-1", RaftAddr: "gw-3.plant.example:9300"},
		{NodeName: "gw-4", ClusterID: "line-1", RaftAddr: "192.168.9.4:9200"},
	}
	if !slices.Equal(peers, want) {
		t.Fatalf("peers\n%+v\nwant\n%+v", peers, want)
	}
	if n := len(rec.records("WARN", "bad signature")); n != 2 {
		t.Errorf("%d bad-signature warnings for 20 bad instances from 2 names, want 2 (rate-limited):\n%s", n, rec)
	}
	if n := len(rec.records("WARN", "NodeName")); n != 1 {
		t.Errorf("%d warnings about a second node named gw-1, want 1:\n%s", n, rec)
	}
	if n := len(rec.records("WARN", "another cluster")); n != 0 {
		t.Errorf("a neighbouring cluster caused warnings:\n%s", rec)
	}
}

func TestInstanceName(t *testing.T) {
	for in, want := range map[string]string{
		"gw-1":                  "gw-1",
		"gw.plant.example":      "gw-plant-example",
		strings.Repeat("é", 40): strings.Repeat("é", 31),
	} {
		if got := instanceName(in); got != want {
			t.Errorf("instanceName(%q) = %q, want %q", in, got, want)
		}
	}
}
