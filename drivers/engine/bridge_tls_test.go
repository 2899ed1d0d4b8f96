package engine

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPKI writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, each signed by the CA, as PEM files in dir.
type testPKI struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func newTestPKI(t *testing.T, dir string) testPKI {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Gantry test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage, ips []net.IP) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalPKCS8PrivateKey(key)
		return write(name+".pem", "CERTIFICATE", der), write(name+".key", "PRIVATE KEY", kder)
	}
	p := testPKI{ca: write("ca.pem", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = leaf(2, "server", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	p.clientCert, p.clientKey = leaf(3, "edge-bridge", x509.ExtKeyUsageClientAuth, nil)
	return p
}

// newTLSRemoteBroker is mosquitto with a TLS listener that requires a
// client certificate signed by pki's CA, and a plain listener (r.port)
// for the test's own client.
func newTLSRemoteBroker(t *testing.T, pki testPKI) (r *remoteBroker, tlsPort string) {
	r = startMosquitto(t, 2, func(ports []string) string {
		return fmt.Sprintf(`per_listener_settings true
user root
persistence false
listener %s 127.0.0.1
allow_anonymous true
listener %s 127.0.0.1
allow_anonymous true
cafile %s
certfile %s
keyfile %s
require_certificate true
tls_version tlsv1.2
`, ports[0], ports[1], pki.ca, pki.serverCert, pki.serverKey)
	})
	return r, r.ports[1]
}

func tlsBridgeSource(port, settings string) string {
	return fmt.Sprintf(`DEFINE ROUTE ToCloud WITH TYPE MQTT_BRIDGE
    ADD SOURCE_CONFIG
        WITH BROKER SELF
    ADD DESTINATION_CONFIG
        WITH BROKER_ADDRESS "127.0.0.1"
        WITH BROKER_PORT '%s'
        WITH CLIENT_ID "edge-bridge"
        WITH USE_TLS true
%s    ADD MAPPING temps
        WITH SOURCE_TOPIC "room/+/temp"
        WITH DESTINATION_TOPIC "site1/room/+/temp"
        WITH DIRECTION "out"
    ADD MAPPING cmds
        WITH SOURCE_TOPIC "cmd/#"
        WITH DESTINATION_TOPIC "cloud/cmd/#"
        WITH DIRECTION "in"
`, port, settings)
}

// The bridge over TLS to a real TLS broker (mosquitto with a certificate
// of a private CA, client certificates required): with the CA and a
// client certificate it connects and messages cross both ways; without
// the CA (the system's roots) the server's certificate is refused and the
// status says so; without a client certificate mosquitto refuses the
// handshake. Neither refusal ever shows as connected.
func TestBridgeTLSToMosquitto(t *testing.T) {
	pki := newTestPKI(t, t.TempDir())
	r, tlsPort := newTLSRemoteBroker(t, pki)
	remote := newRemoteClient(t, r, "#") // on the plain listener
	n := newNode(t)
	n.deploy(tlsBridgeSource(tlsPort, fmt.Sprintf(`        WITH SERVER_CA_CERT_PATH %q
        WITH CLIENT_CERT_PATH %q
        WITH CLIENT_KEY_PATH %q
`, pki.ca, pki.clientCert, pki.clientKey)))
	n.waitStatus("ToCloud", func(s Snapshot) error {
		if s.Connection != Connected {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	eventually(t, waitTimeout, func() error {
		n.publish("room/k/temp", "22")
		if got := remote.received("site1/room/k/temp"); len(got) == 0 || got[0] != "22" {
			return fmt.Errorf("remote got %v", got)
		}
		return nil
	})
	eventually(t, waitTimeout, func() error {
		remote.publish(t, "cloud/cmd/line1/start", "go")
		if v, _ := n.value("cmd/line1/start"); v != "go" {
			return fmt.Errorf("cmd/line1/start = %q", v)
		}
		return nil
	})

	for _, c := range []struct{ name, settings, wantErr string }{
		{"untrusted server", fmt.Sprintf("        WITH CLIENT_CERT_PATH %q\n        WITH CLIENT_KEY_PATH %q\n", pki.clientCert, pki.clientKey),
			"certificate"},
		{"no client certificate", fmt.Sprintf("        WITH SERVER_CA_CERT_PATH %q\n", pki.ca), ""},
	} {
		n.deploy(tlsBridgeSource(tlsPort, c.settings))
		s := n.waitStatus("ToCloud", func(s Snapshot) error {
			if s.Connection == Connected || s.Connects != 0 {
				return fmt.Errorf("%s: connected: %+v", c.name, s)
			}
			if s.LastError == "" {
				return fmt.Errorf("%s: no error in the status %+v", c.name, s)
			}
			return nil
		})
		if c.wantErr != "" && !strings.Contains(s.LastError, c.wantErr) {
			t.Errorf("%s: last error %q, want it to name the %s", c.name, s.LastError, c.wantErr)
		}
	}
}
