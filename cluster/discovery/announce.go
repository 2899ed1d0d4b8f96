package discovery

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// announcement is what a Multicast node says about itself, inside a
// signing envelope. Layout of the payload:
//
//	offset  size  field
//	0       1     kind: 'A' (0x41), announcement version 1
//	1       8     incarnation: random per start of the node, big-endian
//	9       1+n   cluster id: length byte, then UTF-8
//	        1+n   node name
//	        1+n   raft address host:port; empty host = the sender's source address
//	        1+n   ops address host:port, same rule; empty = none
//	        ...   anything after the fields is ignored (later versions append)
type announcement struct {
	Incarnation uint64
	ClusterID   string
	NodeName    string
	RaftAddr    string
	OpsAddr     string
}

const (
	kindAnnouncement = 'A'
	maxField         = 255 // a length byte
)

var errAnnouncement = errors.New("discovery: malformed announcement")

// check reports the first field that cannot be
// announced, naming it.
func (a *announcement) check() error {
	for _, f := range []struct{ name, v string }{
		{"ClusterId", a.ClusterID}, {"NodeName", a.NodeName}, {"raft address", a.RaftAddr}, {"ops address", a.OpsAddr},
	} {
		if len(f.v) > maxField {
			return fmt.Errorf("discovery: %s is %d bytes, want at most %d", f.name, len(f.v), maxField)
		}
		if !printable(f.v) {
			return fmt.Errorf("discovery: %s %q has control characters or invalid UTF-8", f.name, f.v)
		}
	}
	if a.ClusterID == "" || a.NodeName == "" {
		return errors.New("discovery: ClusterId and NodeName must not be empty")
	}
	if _, _, err := splitAddr(a.RaftAddr, true); err != nil {
		return fmt.Errorf("discovery: raft address %q: %v", a.RaftAddr, err)
	}
	if a.OpsAddr != "" {
		if _, _, err := splitAddr(a.OpsAddr, true); err != nil {
			return fmt.Errorf("discovery: ops address %q: %v", a.OpsAddr, err)
		}
	}
	return nil
}

func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// appendAnnouncement appends a's encoding to dst. a must pass check.
func appendAnnouncement(dst []byte, a *announcement) []byte {
	dst = append(dst, kindAnnouncement)
	dst = binary.BigEndian.AppendUint64(dst, a.Incarnation)
	for _, s := range []string{a.ClusterID, a.NodeName, a.RaftAddr, a.OpsAddr} {
		dst = append(dst, byte(len(s)))
		dst = append(dst, s...)
	}
	return dst
}

// decodeAnnouncement decodes and checks a payload; the strings are
// copies, independent of b.
func decodeAnnouncement(b []byte) (announcement, error) {
	var a announcement
	if len(b) < 9 || b[0] != kindAnnouncement {
		return a, errAnnouncement
	}
	a.Incarnation = binary.BigEndian.Uint64(b[1:9])
	b = b[9:]
	for _, f := range []*string{&a.ClusterID, &a.NodeName, &a.RaftAddr, &a.OpsAddr} {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return announcement{}, fmt.Errorf("%w: truncated", errAnnouncement)
		}
		*f = string(b[1 : 1+int(b[0])])
		b = b[1+int(b[0]):]
	}
	if err := a.check(); err != nil {
		return announcement{}, fmt.Errorf("%w: %v", errAnnouncement, err)
	}
	return a, nil
}
