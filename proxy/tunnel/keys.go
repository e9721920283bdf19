package tunnel

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// KeyPair is a certificate and its private key, PEM-encoded.
type KeyPair struct {
	CertPEM, KeyPEM []byte
	Cert            *x509.Certificate
	key             *ecdsa.PrivateKey
}

// TLS returns the pair as a tls.Certificate.
func (k KeyPair) TLS() (tls.Certificate, error) { return tls.X509KeyPair(k.CertPEM, k.KeyPEM) }

// NewCA makes a self-signed CA (ECDSA P-256) valid for the given time.
func NewCA(name string, validity time.Duration) (KeyPair, error) {
	return issue(nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: name, Organization: []string{"m2ho"}},
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, validity)
}

// NewServerCert issues a server certificate for the given DNS names and IP
// addresses (at least one).
func NewServerCert(ca KeyPair, names []string, validity time.Duration) (KeyPair, error) {
	t := &x509.Certificate{
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			t.IPAddresses = append(t.IPAddresses, ip)
		} else if n != "" {
			t.DNSNames = append(t.DNSNames, n)
		}
	}
	if len(t.DNSNames)+len(t.IPAddresses) == 0 {
		return KeyPair{}, errors.New("server certificate: no name (DNS name or IP address) given")
	}
	t.Subject = pkix.Name{CommonName: names[0], Organization: []string{"m2ho"}}
	return issue(&ca, t, validity)
}

// NewClientCert issues a client certificate; name is the client's identity
// on the server (its subject CN).
func NewClientCert(ca KeyPair, name string, validity time.Duration) (KeyPair, error) {
	if name == "" {
		return KeyPair{}, errors.New("client certificate: empty name")
	}
	return issue(&ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name, Organization: []string{"m2ho"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, validity)
}

func issue(ca *KeyPair, t *x509.Certificate, validity time.Duration) (KeyPair, error) {
	if validity <= 0 {
		return KeyPair{}, fmt.Errorf("validity %v: must be positive", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return KeyPair{}, err
	}
	t.SerialNumber = serial
	t.NotBefore = time.Now().Add(-time.Hour)
	t.NotAfter = time.Now().Add(validity)
	parent, signer := t, key
	if ca != nil {
		parent, signer = ca.Cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, t, parent, &key.PublicKey, signer)
	if err != nil {
		return KeyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return KeyPair{}, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		Cert:    cert,
		key:     key,
	}, nil
}

// WriteFiles writes dir/name.crt (0644) and dir/name.key (0600); it
// refuses to overwrite an existing file.
func (k KeyPair) WriteFiles(dir, name string) error {
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{filepath.Join(dir, name+".crt"), k.CertPEM, 0o644}, {filepath.Join(dir, name+".key"), k.KeyPEM, 0o600}} {
		fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return err
		}
		if _, err := fh.Write(f.data); err != nil {
			fh.Close()
			return err
		}
		if err := fh.Close(); err != nil {
			return err
		}
	}
	return nil
}

// LoadCertPool reads PEM certificates from path into a pool.
func LoadCertPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return pool, nil
}
