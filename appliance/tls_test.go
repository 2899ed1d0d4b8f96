package appliance_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// testPKI is a throw-away CA with one server and one client certificate.
type testPKI struct {
	dir                   string
	ca                    *x509.Certificate
	caKey                 *ecdsa.PrivateKey
	caFile                string
	serverCert, serverKey string
	clientCert, clientKey string
}

func newPKI(t *testing.T, ip string) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	p.caKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gantry test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	p.ca, _ = x509.ParseCertificate(der)
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", der)
	p.serverCert, p.serverKey = p.issue(t, "server", 10, ip, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = p.issue(t, "client", 20, "", x509.ExtKeyUsageClientAuth)
	return p
}

func (p *testPKI) write(t *testing.T, name, typ string, der []byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue signs a certificate with serial; files are named after name.
func (p *testPKI) issue(t *testing.T, name string, serial int64, ip string, usage x509.ExtKeyUsage) (string, string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	if ip != "" {
		tmpl.IPAddresses = []net.IP{net.ParseIP(ip)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+"-key.pem", "EC PRIVATE KEY", kder)
}

// issueFor signs a certificate for a node at ip that serves TLS and
// presents itself as a client (the cluster's links); the serial comes from
// the address.
func (p *testPKI) issueFor(t *testing.T, ip string) (string, string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: ip},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP(ip)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return p.write(t, "node-"+ip+".pem", "CERTIFICATE", der), p.write(t, "node-"+ip+"-key.pem", "EC PRIVATE KEY", kder)
}

// TestMutualTLS: with a client CA, a client with a signed certificate is
// served and one without a certificate is refused.
func TestMutualTLS(t *testing.T) {
	pub := needTool(t, "mosquitto_pub")
	ip := loopbackIP()
	pki := newPKI(t, ip)
	startNodeAt(t, ip, map[string]string{
		"COREFLUX_MQTT_CERT_FILE": pki.serverCert, "COREFLUX_MQTT_KEY_FILE": pki.serverKey,
		"COREFLUX_MQTT_CLIENT_CA_FILE": pki.caFile,
	})
	base := []string{"-h", ip, "-p", "8883", "--cafile", pki.caFile, "-t", "tls/x", "-m", "v", "-q", "1"}
	if out, err := exec.Command(pub, append(base, "--cert", pki.clientCert, "--key", pki.clientKey)...).CombinedOutput(); err != nil {
		t.Fatalf("client with a certificate refused: %v %s", err, out)
	}
	if out, err := exec.Command(pub, base...).CombinedOutput(); err == nil {
		t.Fatalf("client without a certificate accepted: %s", out)
	}
	if _, err := tls.Dial("tcp", ip+":8883", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11, InsecureSkipVerify: true}); err == nil {
		t.Fatal("TLS 1.1 accepted; want TLS 1.2 at least")
	}
}

// TestTLSReloadKeepsConnections: after Reload with new files, a new
// connection sees the new certificate and an open one goes on working.
func TestTLSReloadKeepsConnections(t *testing.T) {
	sub := needTool(t, "mosquitto_sub")
	pub := needTool(t, "mosquitto_pub")
	ip := loopbackIP()
	pki := newPKI(t, ip)
	n := startNodeAt(t, ip, map[string]string{"COREFLUX_MQTT_CERT_FILE": pki.serverCert, "COREFLUX_MQTT_KEY_FILE": pki.serverKey})
	if got := serverSerial(t, ip, pki); got != 10 {
		t.Fatalf("serial before reload %d, want 10", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sub, "-h", ip, "-p", "8883", "--cafile", pki.caFile, "-t", "r/#", "-C", "2", "-q", "1")
	out, _ := cmd.StdoutPipe()
	cmd.Start()
	lines := bufio.NewScanner(out)
	publish := func(msg string) {
		if o, err := exec.Command(pub, "-h", ip, "-t", "r/x", "-m", msg, "-q", "1", "-r").CombinedOutput(); err != nil {
			t.Fatalf("publish: %v %s", err, o)
		}
	}
	publish("before")
	if !lines.Scan() || lines.Text() != "before" {
		t.Fatalf("subscriber got %q", lines.Text())
	}
	// Replace the files in place, as certbot or an operator would.
	cert, key := pki.issue(t, "server2", 11, ip, x509.ExtKeyUsageServerAuth)
	os.Rename(cert, pki.serverCert)
	os.Rename(key, pki.serverKey)
	if err := n.Reload("debug"); err != nil {
		t.Fatal(err)
	}
	if got := serverSerial(t, ip, pki); got != 11 {
		t.Fatalf("serial after reload %d, want 11", got)
	}
	publish("after")
	if !lines.Scan() || lines.Text() != "after" {
		t.Fatalf("connection opened before the reload got %q", lines.Text())
	}
	cmd.Wait()
}

func serverSerial(t *testing.T, ip string, pki *testPKI) int64 {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(pki.ca)
	c, err := tls.Dial("tcp", ip+":8883", &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}
