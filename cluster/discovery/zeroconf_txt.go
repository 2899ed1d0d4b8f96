package discovery

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"gantry/cluster/signing"
)

// TXT record of the _gantry-cluster._tcp service, one string per key, in
// this order:
//
//	v=1
//	cluster=<ClusterId>
//	node=<NodeName>
//	raft=<host:port>   empty host = the addresses of the service's host (A records)
//	ops=<host:port>    same rule; absent when the node announces no ops port
//	sig=<base64url, unpadded, of signing.Sum over the canonical form>
//
// The canonical form is "v=1\ncluster=…\nnode=…\nraft=…\nops=…" (ops
// empty when absent), rebuilt from the parsed values, so the order of the
// strings on the wire does not matter. sig is absent without a
// SharedSecret. A key given twice keeps its first value (RFC 6763 6.4).
// The signature has no timestamp: mDNS caches re-serve records by design,
// so it keeps foreign and forged nodes out but cannot detect a replay.

// txtFields are the signed values of the cluster service's TXT record.
type txtFields struct {
	ClusterID, NodeName, RaftAddr, OpsAddr string
}

const txtVersion = "1"

var errTXT = errors.New("discovery: malformed TXT record")

func (f txtFields) canonical() []byte {
	return []byte("v=" + txtVersion + "\ncluster=" + f.ClusterID + "\nnode=" + f.NodeName +
		"\nraft=" + f.RaftAddr + "\nops=" + f.OpsAddr)
}

// clusterTXT returns the TXT strings announcing f, signed by s.
func clusterTXT(s *signing.Signer, f txtFields) ([]string, error) {
	txt := []string{"v=" + txtVersion, "cluster=" + f.ClusterID, "node=" + f.NodeName, "raft=" + f.RaftAddr}
	if f.OpsAddr != "" {
		txt = append(txt, "ops="+f.OpsAddr)
	}
	if sum := s.Sum(f.canonical()); sum != nil {
		txt = append(txt, "sig="+base64.RawURLEncoding.EncodeToString(sum))
	}
	for _, t := range txt {
		if len(t) > 255 {
			return nil, fmt.Errorf("discovery: TXT string %.20q… is %d bytes, want at most 255: shorten ClusterId or NodeName", t, len(t))
		}
	}
	return txt, nil
}

// parseTXT parses a cluster service TXT record. sig is nil when absent.
func parseTXT(txt []string) (f txtFields, sig []byte, err error) {
	vals := map[string]string{}
	for _, t := range txt {
		k, v, ok := strings.Cut(t, "=")
		k = strings.ToLower(k)
		if _, dup := vals[k]; !ok || dup {
			continue
		}
		vals[k] = v
	}
	if vals["v"] != txtVersion {
		return f, nil, fmt.Errorf("%w: version %q, want %q", errTXT, vals["v"], txtVersion)
	}
	f = txtFields{ClusterID: vals["cluster"], NodeName: vals["node"], RaftAddr: vals["raft"], OpsAddr: vals["ops"]}
	a := announcement{ClusterID: f.ClusterID, NodeName: f.NodeName, RaftAddr: f.RaftAddr, OpsAddr: f.OpsAddr}
	if err := a.check(); err != nil {
		return txtFields{}, nil, fmt.Errorf("%w: %v", errTXT, err)
	}
	if s, ok := vals["sig"]; ok {
		if sig, err = base64.RawURLEncoding.DecodeString(s); err != nil || len(sig) == 0 {
			return txtFields{}, nil, fmt.Errorf("%w: sig is not base64url", errTXT)
		}
	}
	return f, sig, nil
}
