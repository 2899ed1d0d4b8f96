package appliance

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"
)

// tlsFiles serves the TLS listener's certificate and client CA pool, and
// swaps them when Reload reads the files again: connections already open
// keep their session, new ones get the new files.
type tlsFiles struct {
	certFile, keyFile, caFile string

	cert atomic.Pointer[tls.Certificate]
	cas  atomic.Pointer[x509.CertPool] // nil without mTLS
}

func newTLSFiles(certFile, keyFile, caFile string) (*tlsFiles, error) {
	t := &tlsFiles{certFile: certFile, keyFile: keyFile, caFile: caFile}
	return t, t.Reload()
}

// Reload reads the certificate, key and CA files again. On error the
// files in use stay in use.
func (t *tlsFiles) Reload() error {
	cert, err := tls.LoadX509KeyPair(t.certFile, t.keyFile)
	if err != nil {
		return fmt.Errorf("tls: Mqtt.CertFile %q, Mqtt.KeyFile %q: %w", t.certFile, t.keyFile, err)
	}
	var pool *x509.CertPool
	if t.caFile != "" {
		pem, err := os.ReadFile(t.caFile)
		if err != nil {
			return fmt.Errorf("tls: Mqtt.ClientCaFile: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("tls: Mqtt.ClientCaFile %q holds no PEM certificate", t.caFile)
		}
	}
	t.cert.Store(&cert)
	t.cas.Store(pool)
	return nil
}

// Config returns the listener's TLS configuration: TLS 1.2 at least, and
// a client certificate signed by the CA file when one is set.
func (t *tlsFiles) Config() *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*t.cert.Load()}}
		if pool := t.cas.Load(); pool != nil {
			c.ClientCAs = pool
			c.ClientAuth = tls.RequireAndVerifyClientCert
		}
		return c, nil
	}
	return base
}
