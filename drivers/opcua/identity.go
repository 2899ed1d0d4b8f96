package opcua

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/pkcs12"
)

// ServerIdentityFile is the file, in <PKI_DIR>/own/private, where an
// OPCUA_SERVER keeps the certificate and key it made itself (PEM, mode
// 0600): copy it to the same place on every node to present one identity.
const ServerIdentityFile = "gantry-opcua-server.pem"

// identity is an OPC UA server's application instance certificate (DER)
// and its RSA key.
type identity struct {
	cert []byte
	key  *rsa.PrivateKey
	from string // the file it came from; "" when made for this start only
}

// serverIdentity returns the server's identity: the first PKCS#12 file
// (.pfx, .p12, without a password) or PEM file (.pem holding a
// certificate and its RSA key) in <pkiDir>/own/private, by name, so that
// nodes given the same file present the same certificate; without one it
// makes a certificate for hosts and writes it there (ServerIdentityFile),
// so that the node keeps it across restarts. pkiDir "" makes one for this
// start only.
func serverIdentity(pkiDir string, hosts []string) (identity, error) {
	if pkiDir == "" {
		return newIdentity(hosts)
	}
	dir := filepath.Join(pkiDir, "own", "private")
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		return identity{}, err
	}
	slices.Sort(names)
	for _, name := range names {
		var id identity
		switch strings.ToLower(filepath.Ext(name)) {
		case ".pfx", ".p12":
			id, err = readPKCS12(name)
		case ".pem":
			id, err = readPEM(name)
		default:
			continue
		}
		if err != nil {
			return identity{}, fmt.Errorf("opcua server: %s: %w", name, err)
		}
		id.from = name
		return id, nil
	}
	id, err := newIdentity(hosts)
	if err != nil {
		return id, err
	}
	name := filepath.Join(dir, ServerIdentityFile)
	if err := writePEM(name, id); err != nil {
		return identity{}, fmt.Errorf("opcua server: keeping its certificate: %w", err)
	}
	id.from = name
	return id, nil
}

func readPKCS12(name string) (identity, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return identity{}, err
	}
	key, cert, err := pkcs12.Decode(b, "")
	if err != nil {
		return identity{}, fmt.Errorf("not a PKCS#12 file without a password in the classic encryption (%w): "+
			"export it with openssl pkcs12 -export -passout pass: -keypbe PBE-SHA1-3DES -certpbe PBE-SHA1-3DES -macalg sha1, or put the certificate and key in one .pem file", err)
	}
	rk, ok := key.(*rsa.PrivateKey)
	if !ok {
		return identity{}, fmt.Errorf("the key is a %T, want RSA (OPC UA's security policies use RSA)", key)
	}
	return identity{cert: cert.Raw, key: rk}, nil
}

func readPEM(name string) (identity, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return identity{}, err
	}
	var id identity
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		switch blk.Type {
		case "CERTIFICATE":
			if id.cert == nil {
				id.cert = blk.Bytes
			}
		case "RSA PRIVATE KEY":
			id.key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		case "PRIVATE KEY":
			var k any
			if k, err = x509.ParsePKCS8PrivateKey(blk.Bytes); err == nil {
				var ok bool
				if id.key, ok = k.(*rsa.PrivateKey); !ok {
					err = fmt.Errorf("the key is a %T, want RSA (OPC UA's security policies use RSA)", k)
				}
			}
		}
		if err != nil {
			return identity{}, err
		}
	}
	if id.cert == nil || id.key == nil {
		return identity{}, errors.New("want a CERTIFICATE and its RSA PRIVATE KEY in PEM")
	}
	c, err := x509.ParseCertificate(id.cert)
	if err != nil {
		return identity{}, err
	}
	if pub, ok := c.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&id.key.PublicKey) {
		return identity{}, errors.New("the key is not the certificate's")
	}
	return id, nil
}

func writePEM(name string, id identity) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: id.cert})
	b = append(b, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(id.key)})...)
	tmp := name + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// newIdentity makes a self-signed application instance certificate for
// hosts, with the server's application URI.
func newIdentity(hosts []string) (identity, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return identity{}, err
	}
	u, _ := url.Parse("urn:gantry:server")
	var dns []string
	var ips []net.IP
	for _, h := range hosts {
		switch ip := net.ParseIP(h); {
		case ip == nil:
			dns = append(dns, h)
		case !ip.IsUnspecified():
			ips = append(ips, ip)
		}
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "Gantry OPCUA_SERVER"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(10, 0, 0), URIs: []*url.URL{u}, DNSNames: dns, IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment | x509.KeyUsageContentCommitment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return identity{}, err
	}
	return identity{cert: der, key: key}, nil
}
