package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/samsahq/samsa/internal/config"
)

// ErrEncryptedKey is returned for an encrypted private key Samsa does not
// read: legacy encrypted PEM ("Proc-Type: 4,ENCRYPTED", DEK-Info), which
// Kafka's PEM keystore refuses too, or an encrypted PKCS#8 key without
// ssl.key.password.
var ErrEncryptedKey = errors.New("auth: legacy encrypted PEM keys are not served, as in Kafka: convert the key to encrypted PKCS#8 (openssl pkcs8 -topk8 -v2 aes-256-cbc -in key.pem -out key-pkcs8.pem) and set ssl.key.password")

// ErrNoKeyPassword is returned for an encrypted PKCS#8 key when
// ssl.key.password is not set.
var ErrNoKeyPassword = errors.New("auth: the private key is encrypted (ENCRYPTED PRIVATE KEY) and ssl.key.password is not set")

// keystore loads the key and certificate chain of ssl.keystore.* and
// reloads ssl.keystore.location when its modification time or size changes,
// checked at most once per reloadCheck, so a renewed certificate is served
// to new connections without a restart. Safe for concurrent use.
type keystore struct {
	ssl config.SSL

	mu      sync.Mutex // guards the fields below
	cert    *tls.Certificate
	mod     time.Time
	size    int64
	checked time.Time
}

// reloadCheck is how often a keystore file's modification time is checked.
const reloadCheck = time.Second

func newKeystore(ssl config.SSL) (*keystore, error) {
	k := &keystore{ssl: ssl}
	if _, err := k.get(); err != nil {
		return nil, err
	}
	return k, nil
}

// get returns the current certificate, reloading the file if it changed;
// a reload that fails keeps serving the previous certificate.
func (k *keystore) get() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ssl.KeystoreLocation == "" {
		if k.cert == nil {
			c, err := parseKeyPair([]byte(k.ssl.KeystoreCertificateChain), []byte(k.ssl.KeystoreKey), k.ssl.KeyPassword)
			if err != nil {
				return nil, fmt.Errorf("ssl.keystore.certificate.chain/ssl.keystore.key: %w", err)
			}
			k.cert = c
		}
		return k.cert, nil
	}
	now := time.Now()
	if k.cert != nil && now.Sub(k.checked) < reloadCheck {
		return k.cert, nil
	}
	k.checked = now
	fi, err := os.Stat(k.ssl.KeystoreLocation)
	if err != nil {
		if k.cert != nil {
			return k.cert, nil
		}
		return nil, fmt.Errorf("ssl.keystore.location: %w", err)
	}
	if k.cert != nil && fi.ModTime().Equal(k.mod) && fi.Size() == k.size {
		return k.cert, nil
	}
	data, err := os.ReadFile(k.ssl.KeystoreLocation)
	if err == nil {
		var c *tls.Certificate
		if c, err = parseKeyPair(data, data, k.ssl.KeyPassword); err == nil {
			k.cert, k.mod, k.size = c, fi.ModTime(), fi.Size()
			return c, nil
		}
	}
	if k.cert != nil {
		return k.cert, nil // half-written file: retry on the next check
	}
	return nil, fmt.Errorf("ssl.keystore.location %s: %w", k.ssl.KeystoreLocation, err)
}

// parseKeyPair reads the certificate chain from certPEM and the private key
// from keyPEM (both may be the same KIP-651 keystore text).
func parseKeyPair(certPEM, keyPEM []byte, password string) (*tls.Certificate, error) {
	var chain, key []byte
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			chain = append(chain, pem.EncodeToMemory(b)...)
		}
	}
	for rest := keyPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch b.Type {
		case "ENCRYPTED PRIVATE KEY":
			if password == "" {
				return nil, ErrNoKeyPassword
			}
			der, err := decryptPKCS8(b.Bytes, password)
			if err != nil {
				return nil, err
			}
			if _, err := x509.ParsePKCS8PrivateKey(der); err != nil {
				return nil, ErrKeyPassword // decrypted to garbage
			}
			key = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			if _, enc := b.Headers["DEK-Info"]; enc {
				return nil, ErrEncryptedKey
			}
			key = pem.EncodeToMemory(b)
		}
	}
	if len(chain) == 0 {
		return nil, errors.New("no CERTIFICATE block")
	}
	if key == nil {
		return nil, errors.New("no PRIVATE KEY block")
	}
	c, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// Truststore returns the CA pool of ssl.truststore.location or
// ssl.truststore.certificates; nil (the system roots) when neither is set.
func Truststore(ssl config.SSL) (*x509.CertPool, error) {
	data := []byte(ssl.TruststoreCertificates)
	if ssl.TruststoreLocation != "" {
		var err error
		if data, err = os.ReadFile(ssl.TruststoreLocation); err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
	}
	if len(data) == 0 {
		return nil, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("ssl.truststore: no PEM certificate")
	}
	return pool, nil
}

// ServerTLS returns the TLS configuration of a listener: its keystore
// (reloaded when the file changes), and with ssl.client.auth requested or
// required, client certificates verified against the truststore. Errors
// name the property at fault.
func ServerTLS(ssl config.SSL) (*tls.Config, error) {
	ks, err := newKeystore(ssl)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return ks.get() },
	}
	switch ssl.ClientAuth {
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	if cfg.ClientAuth != tls.NoClientCert {
		if cfg.ClientCAs, err = Truststore(ssl); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// ClientTLS returns the TLS configuration to dial a listener with ssl's
// properties: the truststore verifies the server (its host name too unless
// ssl.endpoint.identification.algorithm is empty), and the keystore, when
// set, is the client certificate.
func ClientTLS(ssl config.SSL, serverName string) (*tls.Config, error) {
	roots, err := Truststore(ssl)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, ServerName: serverName}
	if ssl.EndpointIdentificationAlgorithm == "" {
		// Kafka's empty ssl.endpoint.identification.algorithm: the chain
		// is verified, the host name is not.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	if ssl.KeystoreLocation != "" || ssl.KeystoreKey != "" {
		ks, err := newKeystore(ssl)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return ks.get() }
	}
	return cfg, nil
}
