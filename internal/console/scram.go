package console

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/samsahq/samsa/internal/auth"
)

// errRelogin says a session's client needs credentials it no longer has:
// the user must log in again.
var errRelogin = errors.New("the session's credentials are gone (the broker asked for a new SCRAM salt or iteration count): log in again")

// scramKeys is a SCRAM-SHA-256 or -512 client (RFC 5802, KIP-84) that
// keeps the user's password only until its first successful exchange:
// from then on it keeps the salted password that exchange derived (for
// the salt and iteration count the broker gave) and forgets the password,
// so a session's client can open new connections and re-authenticate
// (KIP-368) without the console holding the password. A broker that asks
// for another salt or iteration count (the credential changed) gets
// errRelogin. It is safe for concurrent use.
type scramKeys struct {
	name string           // SCRAM-SHA-256 or SCRAM-SHA-512
	mech int8             // auth.ScramSHA256 or auth.ScramSHA512
	h    func() hash.Hash // sha256.New or sha512.New
	user string

	mu     sync.Mutex // guards the fields below
	pass   string     // until the first success
	salt   []byte
	iter   int
	salted []byte // SaltedPassword for salt and iter
	auths  int    // exchanges started, for tests
}

func newSCRAMKeys(sha512 bool, user, pass string) *scramKeys {
	if sha512 {
		return &scramKeys{name: "SCRAM-SHA-512", mech: auth.ScramSHA512, h: sha512New, user: user, pass: pass}
	}
	return &scramKeys{name: "SCRAM-SHA-256", mech: auth.ScramSHA256, h: sha256.New, user: user, pass: pass}
}

var sha512New = sha512.New

// Name implements sasl.Mechanism.
func (m *scramKeys) Name() string { return m.name }

// Authenticate implements sasl.Mechanism: it sends client-first.
func (m *scramKeys) Authenticate(context.Context, string) (sasl.Session, []byte, error) {
	m.mu.Lock()
	m.auths++
	m.mu.Unlock()
	var nonce [20]byte
	rand.Read(nonce[:])
	s := &scramSession{m: m, nonce: base64.RawStdEncoding.EncodeToString(nonce[:])}
	name := strings.NewReplacer("=", "=3D", ",", "=2C").Replace(m.user)
	s.bare = "n=" + name + ",r=" + s.nonce
	return s, []byte("n,," + s.bare), nil
}

// forget drops the password: after a failed login, or from the mechanism
// the broker did not use.
func (m *scramKeys) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pass = ""
}

// hasPassword says whether m still holds the password.
func (m *scramKeys) hasPassword() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pass != ""
}

// saltedFor returns the SaltedPassword for salt and iter, computed from the
// password while m has it.
func (m *scramKeys) saltedFor(salt []byte, iter int) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.salted != nil && bytes.Equal(salt, m.salt) && iter == m.iter {
		return m.salted, nil
	}
	if m.pass == "" {
		return nil, errRelogin
	}
	return auth.SaltPassword(m.mech, m.pass, salt, iter)
}

// succeeded keeps salted for salt and iter and forgets the password.
func (m *scramKeys) succeeded(salt []byte, iter int, salted []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.salt, m.iter, m.salted, m.pass = salt, iter, salted, ""
}

type scramSession struct {
	m           *scramKeys
	nonce, bare string
	step        int
	salt        []byte
	iter        int
	salted      []byte
	serverSig   []byte
}

func (s *scramSession) hmac(key []byte, msg string) []byte {
	h := hmac.New(s.m.h, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// Challenge implements sasl.Session: server-first gets client-final,
// server-final is checked.
func (s *scramSession) Challenge(in []byte) (bool, []byte, error) {
	s.step++
	switch s.step {
	case 1:
		serverFirst := string(in)
		var nonce, salt64, iter string
		for _, kv := range strings.Split(serverFirst, ",") {
			switch {
			case strings.HasPrefix(kv, "r="):
				nonce = kv[2:]
			case strings.HasPrefix(kv, "s="):
				salt64 = kv[2:]
			case strings.HasPrefix(kv, "i="):
				iter = kv[2:]
			}
		}
		if !strings.HasPrefix(nonce, s.nonce) || len(nonce) == len(s.nonce) {
			return false, nil, errors.New("scram: server nonce does not extend the client's")
		}
		salt, err := base64.StdEncoding.DecodeString(salt64)
		if err != nil {
			return false, nil, fmt.Errorf("scram: bad salt: %w", err)
		}
		n, err := strconv.Atoi(iter)
		if err != nil || n < 1 || n > auth.MaxScramIterations { // Kafka never asks for more
			return false, nil, fmt.Errorf("scram: bad iteration count %q", iter)
		}
		s.salt, s.iter = salt, n
		if s.salted, err = s.m.saltedFor(salt, n); err != nil {
			return false, nil, err
		}
		withoutProof := "c=biws,r=" + nonce // biws: base64 of the gs2 header "n,,"
		authMsg := s.bare + "," + serverFirst + "," + withoutProof
		keys := auth.CredentialFromSalted(s.m.mech, s.salted, salt, int32(n))
		clientKey := s.hmac(s.salted, "Client Key")
		sig := s.hmac(keys.StoredKey, authMsg)
		for i := range sig {
			sig[i] ^= clientKey[i] // ClientProof
		}
		s.serverSig = s.hmac(keys.ServerKey, authMsg)
		return false, []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(sig)), nil
	case 2:
		final := string(in)
		if e, ok := strings.CutPrefix(final, "e="); ok {
			return false, nil, fmt.Errorf("scram: %s", e)
		}
		v, ok := strings.CutPrefix(final, "v=")
		if i := strings.IndexByte(v, ','); i >= 0 {
			v = v[:i]
		}
		got, err := base64.StdEncoding.DecodeString(v)
		if !ok || err != nil || !hmac.Equal(got, s.serverSig) {
			return false, nil, errors.New("scram: the server's signature does not match")
		}
		s.m.succeeded(s.salt, s.iter, s.salted)
		return true, nil, nil
	}
	return false, nil, errors.New("scram: unexpected challenge")
}
