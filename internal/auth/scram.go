package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"strings"
	"time"

	"github.com/xdg-go/scram"
)

// ScramCredential is a user's stored SCRAM credential (RFC 5802 section 3):
// what the server keeps instead of the password, as Kafka's
// UserScramCredentialRecord.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte // H(HMAC(SaltedPassword, "Client Key"))
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key")
	Iterations int32
}

// SCRAM mechanism numbers of AlterUserScramCredentials and
// DescribeUserScramCredentials (KIP-554's ScramMechanism).
const (
	ScramSHA256 int8 = 1
	ScramSHA512 int8 = 2
)

// Iteration bounds of a SCRAM credential, Kafka's (ScramMechanism's
// minIterations 4096, and its 16384 maximum).
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
)

// ScramMechanismName is the SASL name of a mechanism number; "" for an
// unknown number.
func ScramMechanismName(m int8) string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return ""
}

// ScramMechanism is the number of a SASL mechanism name; 0 for none.
func ScramMechanism(name string) int8 {
	switch strings.ToUpper(name) {
	case "SCRAM-SHA-256":
		return ScramSHA256
	case "SCRAM-SHA-512":
		return ScramSHA512
	}
	return 0
}

func scramHash(m int8) func() hash.Hash {
	if m == ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

// SaltPassword is Hi(password, salt, iterations) of RFC 5802, PBKDF2 with
// the mechanism's hash.
func SaltPassword(m int8, password string, salt []byte, iterations int) ([]byte, error) {
	h := scramHash(m)
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// CredentialFromSalted derives the stored credential from a salted password
// (what AlterUserScramCredentials carries).
func CredentialFromSalted(m int8, salted, salt []byte, iterations int32) ScramCredential {
	h := scramHash(m)
	mac := func(key []byte, s string) []byte {
		x := hmac.New(h, key)
		x.Write([]byte(s))
		return x.Sum(nil)
	}
	ck := h()
	ck.Write(mac(salted, "Client Key"))
	return ScramCredential{Salt: salt, StoredKey: ck.Sum(nil), ServerKey: mac(salted, "Server Key"), Iterations: iterations}
}

// NewScramCredential salts password with a fresh random salt, for
// `samsa storage format --add-scram` and `samsa user`. Iterations zero
// means 4096, Kafka's default.
func NewScramCredential(m int8, password string, iterations int32) (ScramCredential, error) {
	if iterations == 0 {
		iterations = MinScramIterations
	}
	if iterations < MinScramIterations || iterations > MaxScramIterations {
		return ScramCredential{}, fmt.Errorf("iterations %d outside [%d, %d]", iterations, MinScramIterations, MaxScramIterations)
	}
	salt := make([]byte, 32)
	rand.Read(salt)
	salted, err := SaltPassword(m, password, salt, int(iterations))
	if err != nil {
		return ScramCredential{}, err
	}
	return CredentialFromSalted(m, salted, salt, iterations), nil
}

// scramExchange runs xdg-go/scram's server conversation: client-first,
// server-first, client-final, server-final.
type scramExchange struct {
	conv      *scram.ServerConversation
	principal string
}

var errUnknownUser = errors.New("unknown user")

func newScramExchange(mechanism string, creds ScramCredentials) *scramExchange {
	m := ScramMechanism(mechanism)
	gen := scram.SHA256
	if m == ScramSHA512 {
		gen = scram.SHA512
	}
	lookup := func(user string) (scram.StoredCredentials, error) {
		c, ok := creds(mechanism, user)
		if !ok {
			return scram.StoredCredentials{}, errUnknownUser
		}
		return scram.StoredCredentials{
			KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
			StoredKey:  c.StoredKey,
			ServerKey:  c.ServerKey,
		}, nil
	}
	srv, _ := gen.NewServer(lookup) // fails only for a nil lookup
	return &scramExchange{conv: srv.NewConversation()}
}

func (s *scramExchange) Step(in []byte) (out []byte, done bool, err error) {
	defer func() {
		// xdg-go/scram v1.1.2 indexes past the end of a client proof
		// longer than the hash (xorBytes): a malformed message, not a
		// reason to crash the connection's goroutine.
		if r := recover(); r != nil {
			out, done, err = nil, false, fmt.Errorf("%w: malformed SCRAM message", ErrAuthentication)
		}
	}()
	return s.step(in)
}

func (s *scramExchange) step(in []byte) ([]byte, bool, error) {
	if s.conv.Done() {
		return nil, false, fmt.Errorf("%w: SCRAM exchange already complete", ErrAuthentication)
	}
	out, err := s.conv.Step(string(in))
	if err != nil {
		// Kafka does not tell an unknown user from a bad password.
		return nil, false, fmt.Errorf("%w: invalid credentials (%v)", ErrAuthentication, redactScram(err))
	}
	if !s.conv.Done() {
		return []byte(out), false, nil
	}
	if !s.conv.Valid() {
		return nil, false, fmt.Errorf("%w: invalid credentials", ErrAuthentication)
	}
	if z := s.conv.AuthzID(); z != "" && z != s.conv.Username() {
		return nil, false, fmt.Errorf("%w: authorization id %q differs from the user name", ErrAuthentication, z)
	}
	s.principal = "User:" + s.conv.Username()
	return []byte(out), true, nil
}

// redactScram keeps an unknown user and a bad proof alike in messages.
func redactScram(err error) string {
	if errors.Is(err, errUnknownUser) || strings.Contains(err.Error(), "proof") {
		return "invalid user credentials"
	}
	return err.Error()
}

func (s *scramExchange) Principal() string { return s.principal }
func (s *scramExchange) Expiry() time.Time { return time.Time{} }
