package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
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

// scramExchange is the server side of SCRAM (RFC 5802 section 5):
// client-first, server-first, client-final, server-final, with Kafka's
// ScramSaslServer's leniencies: the client-final nonce must end with the
// server's nonce (librdkafka sends its own nonce before it), and
// extensions after the nonce are ignored. Channel binding is not served.
type scramExchange struct {
	mech      int8
	creds     ScramCredentials
	name      string // mechanism name
	step      int    // 0: expects client-first, 1: client-final, 2: done
	gs2       string // the client's GS2 header, as sent
	user      string
	cred      ScramCredential
	nonce     string // server-first nonce: client's and ours
	authFirst string // client-first-bare + "," + server-first
	principal string
}

func newScramExchange(mechanism string, creds ScramCredentials) *scramExchange {
	return &scramExchange{mech: ScramMechanism(mechanism), name: mechanism, creds: creds}
}

func scramFail(why string) error {
	return fmt.Errorf("%w: %s", ErrAuthentication, why)
}

// ParseScramClientFirst parses a client-first message (RFC 5802 section
// 7): gs2-header ("n," or "y,", then an optional a=authzid, then ","),
// then n=saslname (=2C and =3D decoded) and r=nonce; fields after the
// nonce (Kafka's extensions) are returned unparsed.
func ParseScramClientFirst(msg string) (gs2, authzid, user, nonce, bare string, err error) {
	fields := strings.SplitN(msg, ",", 3)
	if len(fields) != 3 {
		return "", "", "", "", "", scramFail("invalid SCRAM client-first message")
	}
	switch fields[0] {
	case "n", "y":
	default:
		return "", "", "", "", "", scramFail("SCRAM channel binding is not supported")
	}
	if fields[1] != "" {
		var ok bool
		if authzid, ok = strings.CutPrefix(fields[1], "a="); !ok {
			return "", "", "", "", "", scramFail("invalid SCRAM authorization id")
		}
		if authzid, err = decodeSaslName(authzid); err != nil {
			return "", "", "", "", "", err
		}
	}
	gs2, bare = fields[0]+","+fields[1]+",", fields[2]
	parts := strings.Split(bare, ",")
	if len(parts) < 2 || strings.HasPrefix(parts[0], "m=") {
		return "", "", "", "", "", scramFail("invalid SCRAM client-first message")
	}
	u, ok := strings.CutPrefix(parts[0], "n=")
	if !ok || u == "" {
		return "", "", "", "", "", scramFail("invalid SCRAM user name")
	}
	if user, err = decodeSaslName(u); err != nil {
		return "", "", "", "", "", err
	}
	if nonce, ok = strings.CutPrefix(parts[1], "r="); !ok || nonce == "" {
		return "", "", "", "", "", scramFail("invalid SCRAM nonce")
	}
	return gs2, authzid, user, nonce, bare, nil
}

// decodeSaslName decodes RFC 5802's saslname: =2C is ',', =3D is '=',
// any other '=' is invalid.
func decodeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", scramFail("invalid SCRAM saslname encoding")
		}
		i += 2
	}
	return b.String(), nil
}

// ParseScramClientFinal parses a client-final message: c=channel binding
// (base64), r=nonce, optional extensions, then p=proof (base64) last. It
// returns the message without the proof, which the signatures cover.
func ParseScramClientFinal(msg string) (cbind []byte, nonce string, proof []byte, withoutProof string, err error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, "", nil, "", scramFail("SCRAM client-final message without a proof")
	}
	withoutProof = msg[:i]
	if proof, err = base64.StdEncoding.DecodeString(msg[i+3:]); err != nil {
		return nil, "", nil, "", scramFail("invalid SCRAM proof encoding")
	}
	parts := strings.Split(withoutProof, ",")
	if len(parts) < 2 {
		return nil, "", nil, "", scramFail("invalid SCRAM client-final message")
	}
	c, ok := strings.CutPrefix(parts[0], "c=")
	if !ok {
		return nil, "", nil, "", scramFail("invalid SCRAM channel binding")
	}
	if cbind, err = base64.StdEncoding.DecodeString(c); err != nil {
		return nil, "", nil, "", scramFail("invalid SCRAM channel binding encoding")
	}
	if nonce, ok = strings.CutPrefix(parts[1], "r="); !ok {
		return nil, "", nil, "", scramFail("invalid SCRAM nonce")
	}
	return cbind, nonce, proof, withoutProof, nil
}

func (s *scramExchange) Step(in []byte) ([]byte, bool, error) {
	switch s.step {
	case 0:
		s.step = 2 // until this step succeeds
		gs2, authzid, user, cnonce, bare, err := ParseScramClientFirst(string(in))
		if err != nil {
			return nil, false, err
		}
		if authzid != "" && authzid != user {
			return nil, false, scramFail(fmt.Sprintf("authorization id %q differs from the user name", authzid))
		}
		cred, ok := s.creds(s.name, user)
		if !ok {
			// Kafka does not tell an unknown user from a bad password.
			return nil, false, scramFail("invalid user credentials")
		}
		snonce := make([]byte, 18)
		rand.Read(snonce)
		s.gs2, s.user, s.cred = gs2, user, cred
		s.nonce = cnonce + base64.RawURLEncoding.EncodeToString(snonce)
		first := "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(int(cred.Iterations))
		s.authFirst = bare + "," + first
		s.step = 1
		return []byte(first), false, nil
	case 1:
		s.step = 2
		cbind, nonce, proof, withoutProof, err := ParseScramClientFinal(string(in))
		if err != nil {
			return nil, false, err
		}
		if string(cbind) != s.gs2 {
			return nil, false, scramFail("SCRAM channel binding does not match the GS2 header")
		}
		if !strings.HasSuffix(nonce, s.nonce) {
			return nil, false, scramFail("invalid SCRAM nonce")
		}
		h := scramHash(s.mech)
		if len(proof) != h().Size() {
			return nil, false, scramFail("invalid user credentials")
		}
		authMsg := s.authFirst + "," + withoutProof
		mac := func(key []byte) []byte {
			x := hmac.New(h, key)
			x.Write([]byte(authMsg))
			return x.Sum(nil)
		}
		sig := mac(s.cred.StoredKey)
		clientKey := make([]byte, len(proof))
		for i := range proof {
			clientKey[i] = proof[i] ^ sig[i]
		}
		d := h()
		d.Write(clientKey)
		if !hmac.Equal(d.Sum(nil), s.cred.StoredKey) {
			return nil, false, scramFail("invalid user credentials")
		}
		s.principal = "User:" + s.user
		return []byte("v=" + base64.StdEncoding.EncodeToString(mac(s.cred.ServerKey))), true, nil
	}
	return nil, false, scramFail("SCRAM exchange already complete")
}

func (s *scramExchange) Principal() string { return s.principal }
func (s *scramExchange) Expiry() time.Time { return time.Time{} }
