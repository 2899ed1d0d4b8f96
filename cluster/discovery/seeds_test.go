package discovery

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSeedsPeers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    SeedsOptions
		hosts   map[string][]string
		local   []string
		want    []string
		wantErr string // substring of the error; "" = none
	}{
		{
			name:  "names and literals",
			opts:  SeedsOptions{Seeds: []string{"broker-a:9200", "broker-b:9200", "10.0.0.9:9300"}},
			hosts: map[string][]string{"broker-a": {"10.0.0.1"}, "broker-b": {"10.0.0.2"}},
			want:  []string{"10.0.0.1:9200", "10.0.0.2:9200", "10.0.0.9:9300"},
		},
		{
			name:  "one name, several addresses, duplicates once",
			opts:  SeedsOptions{Seeds: []string{"brokers:9200", "10.0.0.1:9200"}},
			hosts: map[string][]string{"brokers": {"10.0.0.2", "10.0.0.1", "10.0.0.3"}},
			want:  []string{"10.0.0.1:9200", "10.0.0.2:9200", "10.0.0.3:9200"},
		},
		{
			name:    "a name that does not resolve yet is reported, the rest returned",
			opts:    SeedsOptions{Seeds: []string{"broker-a:9200", "broker-late:9200"}},
			hosts:   map[string][]string{"broker-a": {"10.0.0.1"}},
			want:    []string{"10.0.0.1:9200"},
			wantErr: "broker-late:9200",
		},
		{
			name: "own advertised address, as written, other case",
			opts: SeedsOptions{Seeds: []string{"broker-a:9200", "Broker-B:9200"}, AdvertiseAddr: "broker-b:9200"},
			hosts: map[string][]string{
				"broker-a": {"10.0.0.1"}, // broker-b is never looked up
			},
			want: []string{"10.0.0.1:9200"},
		},
		{
			name:  "seed resolving to the advertised host's address",
			opts:  SeedsOptions{Seeds: []string{"10.0.0.1:9200", "10.0.0.2:9200"}, AdvertiseAddr: "broker-b:9200"},
			hosts: map[string][]string{"broker-b": {"10.0.0.2"}},
			want:  []string{"10.0.0.1:9200"},
		},
		{
			name: "same address, other port, is another node",
			opts: SeedsOptions{Seeds: []string{"10.0.0.2:9200", "10.0.0.2:9300"}, AdvertiseAddr: "10.0.0.2:9200"},
			want: []string{"10.0.0.2:9300"},
		},
		{
			name: "bound to one loopback address: the others are other nodes",
			opts: SeedsOptions{Seeds: []string{"127.0.0.1:9200", "127.0.0.2:9200", "127.0.0.3:9200"},
				AdvertiseAddr: "node-2:9200", BindAddr: "127.0.0.2:9200"},
			want: []string{"127.0.0.1:9200", "127.0.0.3:9200"},
		},
		{
			name: "bound to every address: local and loopback addresses are this node",
			opts: SeedsOptions{Seeds: []string{"127.0.0.1:9200", "192.168.5.7:9200", "192.168.5.8:9200", "192.168.5.7:9300"},
				AdvertiseAddr: "gw-7:9200", BindAddr: "0.0.0.0:9200"},
			local: []string{"127.0.0.1", "192.168.5.7"},
			want:  []string{"192.168.5.7:9300", "192.168.5.8:9200"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFakeResolver()
			for h, a := range tc.hosts {
				r.set(h, a...)
			}
			tc.opts.Resolver = r
			s, err := NewSeeds(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			s.localIPs = func() ([]net.IP, error) { return ips(tc.local...), nil }
			peers, err := s.Peers(context.Background())
			if got := addrs(peers); !slices.Equal(got, tc.want) {
				t.Errorf("peers %v, want %v", got, tc.want)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one naming %q", err, tc.wantErr)
			}
			for _, p := range peers {
				if p.NodeName != "" || p.ClusterID != "" {
					t.Errorf("seed peer %+v claims a node name or cluster id it cannot know", p)
				}
			}
		})
	}
}

// A seed name is looked up again on every call: one that appears later is
// found, one that disappears is dropped, one whose DNS fails is reported.
func TestSeedsResolveEachCall(t *testing.T) {
	r := newFakeResolver()
	r.set("broker-a", "10.0.0.1")
	s, err := NewSeeds(SeedsOptions{Seeds: []string{"broker-a:9200", "broker-b:9200"}, Resolver: r})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	step := func(name string, want []string, wantErr error) {
		t.Helper()
		peers, err := s.Peers(ctx)
		if got := addrs(peers); !slices.Equal(got, want) {
			t.Errorf("%s: peers %v, want %v", name, got, want)
		}
		if (wantErr == nil) != (err == nil) || (wantErr != nil && !errors.Is(err, wantErr)) {
			t.Errorf("%s: error %v, want %v", name, err, wantErr)
		}
	}
	step("b not published yet", []string{"10.0.0.1:9200"}, ErrNotFound)
	r.set("broker-b", "10.0.0.2")
	step("b appears", []string{"10.0.0.1:9200", "10.0.0.2:9200"}, nil)
	r.set("broker-b", "10.0.0.12")
	step("b moved", []string{"10.0.0.12:9200", "10.0.0.1:9200"}, nil) // string order
	r.fail("broker-a", errTemporary)
	step("DNS fails for a", []string{"10.0.0.12:9200"}, errTemporary)
	r.set("broker-a")
	r.set("broker-b")
	step("both gone", nil, ErrNotFound)
}

func TestSeedsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts SeedsOptions
		want string
	}{
		{"no seeds", SeedsOptions{}, "Seeds is empty"},
		{"no port", SeedsOptions{Seeds: []string{"broker-a"}}, `seed "broker-a"`},
		{"port 0", SeedsOptions{Seeds: []string{"broker-a:0"}}, `seed "broker-a:0"`},
		{"no host", SeedsOptions{Seeds: []string{":9200"}}, `seed ":9200"`},
		{"bad advertised", SeedsOptions{Seeds: []string{"a:1"}, AdvertiseAddr: "b"}, "advertised address"},
		{"bind host name", SeedsOptions{Seeds: []string{"a:1"}, BindAddr: "gw:9200"}, "bind address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSeeds(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSeedsRunReturnsWhenCancelled(t *testing.T) {
	checkNoLeak(t)
	s, err := NewSeeds(SeedsOptions{Seeds: []string{"10.0.0.1:9200"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := Probe(context.Background(), l.Addr().String()); err != nil {
		t.Errorf("Probe of a listening port: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	if err := Probe(context.Background(), addr); err == nil {
		t.Errorf("Probe of a closed port succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	// 192.0.2.0/24 (TEST-NET-1) is not routed: the connect hangs until the deadline.
	if err := Probe(ctx, "192.0.2.1:9200"); err == nil {
		t.Errorf("Probe of an unroutable address succeeded")
	}
	if d := time.Since(start); d > DefaultProbeTimeout+time.Second {
		t.Errorf("Probe took %v, want it bounded by the deadline", d)
	}
}
