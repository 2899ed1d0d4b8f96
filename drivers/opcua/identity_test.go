package opcua

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopcua/opcua"
)

// serverCert starts an OPCUA_SERVER with pkiDir on a free port, asks it
// for its endpoints as a SCADA client does, and returns the certificate
// it presents (the same on every endpoint).
func serverCert(t *testing.T, pkiDir, advertised string) []byte {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := NewServer(&ServerConfig{Bind: "127.0.0.1", Port: port, Advertised: advertised}, nil)
	s.SetPKIDir(pkiDir)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eps, err := opcua.GetEndpoints(ctx, "opc.tcp://127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) == 0 {
		t.Fatal("no endpoints")
	}
	for _, ep := range eps[1:] {
		if !bytes.Equal(ep.ServerCertificate, eps[0].ServerCertificate) {
			t.Fatalf("endpoint %s presents another certificate", ep.EndpointURL)
		}
	}
	return eps[0].ServerCertificate
}

// The seed's shared identity: nodes given the same PKCS#12 file in
// <PKI_DIR>/own/private present the same certificate (a SCADA client
// behind ADVERTISED_HOST trusts one server), whose URI is the server's
// application URI. Without a file, a node makes one, keeps it there and
// presents it again after a restart; the file it wrote, copied to another
// node, gives that node the same identity. A file that is not an
// identity stops the server with its name.
func TestServerIdentity(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl missing")
	}
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(openssl, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v\n%s", args, err, out)
		}
	}
	run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-out", "c.pem", "-days", "30",
		"-subj", "/CN=opcua.example.com", "-addext", "subjectAltName=URI:urn:plant:scada-gw,DNS:opcua.example.com")
	run("pkcs12", "-export", "-in", "c.pem", "-inkey", "k.pem", "-out", "plant.pfx", "-passout", "pass:",
		"-keypbe", "PBE-SHA1-3DES", "-certpbe", "PBE-SHA1-3DES", "-macalg", "sha1")
	pfx, _ := os.ReadFile(filepath.Join(dir, "plant.pfx"))
	want := pemCert(t, filepath.Join(dir, "c.pem"))
	node := func(name string, files map[string][]byte) string {
		pki := filepath.Join(dir, name)
		os.MkdirAll(filepath.Join(pki, "own", "private"), 0o700)
		for f, b := range files {
			os.WriteFile(filepath.Join(pki, "own", "private", f), b, 0o600)
		}
		return pki
	}
	a, b := node("node-a", map[string][]byte{"plant.pfx": pfx}), node("node-b", map[string][]byte{"plant.pfx": pfx})
	ca, cb := serverCert(t, a, "opcua.example.com"), serverCert(t, b, "opcua.example.com")
	if !bytes.Equal(ca, want) || !bytes.Equal(cb, want) {
		t.Fatal("the nodes do not present the PKCS#12 file's certificate")
	}
	if c, _ := x509.ParseCertificate(ca); len(c.URIs) != 1 || c.URIs[0].String() != "urn:plant:scada-gw" {
		t.Fatalf("certificate URIs %v", c.URIs)
	}

	fresh := node("node-c", nil)
	first := serverCert(t, fresh, "")
	kept := filepath.Join(fresh, "own", "private", ServerIdentityFile)
	if fi, err := os.Stat(kept); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the made certificate was not kept in %s (mode 0600): %v", kept, err)
	}
	if again := serverCert(t, fresh, ""); !bytes.Equal(again, first) {
		t.Fatal("a restarted server presents another certificate")
	}
	pemFile, _ := os.ReadFile(kept)
	if copied := serverCert(t, node("node-d", map[string][]byte{"copy.pem": pemFile}), ""); !bytes.Equal(copied, first) {
		t.Fatal("the kept file, copied to another node, does not give the same identity")
	}

	bad := node("node-e", map[string][]byte{"broken.pem": []byte("not a certificate")})
	s := NewServer(&ServerConfig{Bind: "127.0.0.1", Port: 0}, nil)
	s.SetPKIDir(bad)
	if err := s.Start(); err == nil || !strings.Contains(err.Error(), "broken.pem") {
		s.Stop()
		t.Fatalf("Start with a broken identity file: %v", err)
	}
}

func pemCert(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", name)
	}
	return blk.Bytes
}
