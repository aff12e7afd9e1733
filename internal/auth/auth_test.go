package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xdg-go/scram"

	"github.com/samsahq/samsa/internal/config"
)

func TestPrincipalMappingRules(t *testing.T) {
	for _, tc := range []struct {
		rules, dn, want string
		err             bool
	}{
		{"", "CN=alice,OU=eng,O=Samsa", "CN=alice,OU=eng,O=Samsa", false},
		{"DEFAULT", "CN=alice", "CN=alice", false},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`, "CN=kafka,OU=ServiceUsers,O=Org", "kafka", false},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`, "CN=bob,OU=People", "CN=bob,OU=People", false},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/L`, "CN=Alice,OU=Eng,O=X", "alice@eng", false},
		{`RULE:^CN=(.*?),OU=(.*?)$/$1/U`, "CN=alice,OU=eng", "ALICE", false},
		// A slash escaped in the pattern and the replacement.
		{`RULE:^CN=a\/b$/x\/$0/`, "CN=a/b", "x/CN=a/b", false},
		// $1x is group 1 then x, as Java's $1x.
		{`RULE:^CN=(\w+)$/$1x/`, "CN=al", "alx", false},
		{`RULE:^CN=zz$/q/`, "CN=alice", "", true}, // no rule matches: refused, as Kafka
	} {
		m, err := ParsePrincipalMappingRules(tc.rules)
		if err != nil {
			t.Fatalf("%q: %v", tc.rules, err)
		}
		got, err := m.Name(tc.dn)
		if tc.err != (err != nil) || got != tc.want {
			t.Errorf("rules %q, dn %q: %q, %v; want %q (error %v)", tc.rules, tc.dn, got, err, tc.want, tc.err)
		}
	}
	for _, bad := range []string{"RULE:x", "NOPE", "RULE:(/a/"} {
		if _, err := ParsePrincipalMappingRules(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestJAAS(t *testing.T) {
	opts, err := ParseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="a \"quoted\" secret" user_admin="admin-secret" user_alice=plain;`)
	if err != nil {
		t.Fatal(err)
	}
	if opts["username"] != "admin" || opts["password"] != `a "quoted" secret` || opts["user_alice"] != "plain" {
		t.Fatalf("options %v", opts)
	}
	if u := PlainUsers(opts); len(u) != 2 || u["admin"] != "admin-secret" || u["alice"] != "plain" {
		t.Fatalf("users %v", u)
	}
	for _, bad := range []string{"", "Module", `Module required user_a="x"`, `Module required user_a="x;`, `Module required =x;`, `Module required a=b; extra`} {
		if _, err := ParseJAAS(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPlain(t *testing.T) {
	users := map[string]string{"alice": "secret"}
	for _, tc := range []struct {
		msg string
		ok  bool
	}{
		{"\x00alice\x00secret", true},
		{"alice\x00alice\x00secret", true},
		{"bob\x00alice\x00secret", false}, // another authorization id
		{"\x00alice\x00wrong", false},
		{"\x00mallory\x00secret", false},
		{"\x00alice", false},
		{"\x00\x00secret", false},
		{"\x00alice\x00secret\x00", false},
	} {
		ex := &plainExchange{users: users}
		_, done, err := ex.Step([]byte(tc.msg))
		if done != tc.ok || (err == nil) != tc.ok || tc.ok && ex.Principal() != "User:alice" {
			t.Errorf("%q: done %v err %v principal %q", tc.msg, done, err, ex.Principal())
		}
		if err != nil && !errors.Is(err, ErrAuthentication) {
			t.Errorf("%q: %v is not ErrAuthentication", tc.msg, err)
		}
	}
}

// TestScramAgainstClient runs xdg-go/scram's client against the exchange,
// with the credential NewScramCredential stores, for both mechanisms; a
// wrong password and an unknown user fail alike.
func TestScramAgainstClient(t *testing.T) {
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		m := ScramMechanism(mech)
		cred, err := NewScramCredential(m, "pencil", 4096)
		if err != nil {
			t.Fatal(err)
		}
		lookup := func(gotMech, user string) (ScramCredential, bool) {
			return cred, gotMech == mech && user == "user"
		}
		gen := scram.SHA256
		if m == ScramSHA512 {
			gen = scram.SHA512
		}
		for _, tc := range []struct {
			user, pass string
			ok         bool
		}{{"user", "pencil", true}, {"user", "pen", false}, {"other", "pencil", false}} {
			cl, err := gen.NewClient(tc.user, tc.pass, "")
			if err != nil {
				t.Fatal(err)
			}
			conv := cl.NewConversation()
			ex := newScramExchange(mech, lookup)
			msg, err := conv.Step("")
			if err != nil {
				t.Fatal(err)
			}
			var done bool
			var exErr error
			for i := 0; i < 2 && exErr == nil && !done; i++ {
				var out []byte
				out, done, exErr = ex.Step([]byte(msg))
				if exErr == nil {
					msg, _ = conv.Step(string(out))
				}
			}
			if tc.ok != (done && exErr == nil) {
				t.Fatalf("%s %s/%s: done %v err %v", mech, tc.user, tc.pass, done, exErr)
			}
			if tc.ok && ex.Principal() != "User:user" {
				t.Fatalf("principal %q", ex.Principal())
			}
			if !tc.ok && !strings.Contains(exErr.Error(), "invalid") {
				t.Fatalf("error %v", exErr)
			}
		}
	}
}

// TestScramLongProof: a client-final message whose proof is longer than
// the hash fails the exchange (xdg-go/scram v1.1.2's server panics there).
func TestScramLongProof(t *testing.T) {
	cred, _ := NewScramCredential(ScramSHA256, "pencil", 4096)
	ex := newScramExchange("SCRAM-SHA-256", func(string, string) (ScramCredential, bool) { return cred, true })
	out, _, err := ex.Step([]byte("n,,n=user,r=abc"))
	if err != nil {
		t.Fatal(err)
	}
	nonce := strings.TrimPrefix(strings.Split(string(out), ",")[0], "r=")
	final := "c=biws,r=" + nonce + ",p=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 200))
	if _, _, err := ex.Step([]byte(final)); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("long proof: %v", err)
	}
}

func TestParseOAuthBearer(t *testing.T) {
	tok, ext, err := ParseOAuthBearer([]byte("n,,\x01auth=Bearer abc.def.ghi\x01traceId=7\x01\x01"))
	if err != nil || tok != "abc.def.ghi" || ext["traceId"] != "7" {
		t.Fatalf("%q %v %v", tok, ext, err)
	}
	if tok, _, err := ParseOAuthBearer([]byte("n,a=alice,\x01auth=bearer t\x01\x01")); err != nil || tok != "t" {
		t.Fatalf("with authzid: %q %v", tok, err)
	}
	for _, bad := range []string{"", "n,,", "n,,\x01auth=Bearer t\x01", "x,,\x01auth=Bearer t\x01\x01", "n,,\x01auth=Basic t\x01\x01", "n,,\x01noauth=1\x01\x01", "n,,\x01auth=Bearer \x01\x01", "n,,\x01auth=Bearer a\x01auth=Bearer b\x01\x01"} {
		if _, _, err := ParseOAuthBearer([]byte(bad)); !errors.Is(err, ErrAuthentication) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestKeystoreReload: a keystore file replaced on disk is served to new
// handshakes without a restart; a half-written file keeps the old one.
func TestKeystoreReload(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewDevCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	path := dir + "/server.pem"
	write := func(cn string) {
		ks, err := ca.Issue(pkix.Name{CommonName: cn}, []string{"localhost"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeFileAt(path, ks, time.Now().Add(time.Duration(len(cn))*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	ks, err := newKeystore(config.SSL{KeystoreLocation: path})
	if err != nil {
		t.Fatal(err)
	}
	cn := func() string {
		c, err := ks.get()
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.Subject.CommonName
	}
	if got := cn(); got != "one" {
		t.Fatalf("first %q", got)
	}
	write("second")
	ks.mu.Lock()
	ks.checked = time.Time{} // the next get checks the file
	ks.mu.Unlock()
	if got := cn(); got != "second" {
		t.Fatalf("after the file changed: %q", got)
	}
	if err := writeFileAt(path, []byte("-----BEGIN PRIV"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ks.mu.Lock()
	ks.checked = time.Time{}
	ks.mu.Unlock()
	if got := cn(); got != "second" {
		t.Fatalf("after a broken write: %q", got)
	}
}

// writeFileAt writes data to path and sets its modification time.
func writeFileAt(path string, data []byte, mod time.Time) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return os.Chtimes(path, mod, mod)
}

// TestScramLibrdkafkaNonce: librdkafka's client-final nonce is its own
// nonce followed by the server-first one; Kafka's server accepts a nonce
// that ends with the server's, and so does this one, with the proof
// computed over the message as sent.
func TestScramLibrdkafkaNonce(t *testing.T) {
	cred, _ := NewScramCredential(ScramSHA256, "pencil", 4096)
	ex := newScramExchange("SCRAM-SHA-256", func(string, string) (ScramCredential, bool) { return cred, true })
	first := "n,,n=user,r=cnonce"
	out, _, err := ex.Step([]byte(first))
	if err != nil {
		t.Fatal(err)
	}
	serverFirst := string(out)
	nonce := strings.TrimPrefix(strings.Split(serverFirst, ",")[0], "r=")
	withoutProof := "c=biws,r=cnonce" + nonce
	salted, _ := SaltPassword(ScramSHA256, "pencil", cred.Salt, 4096)
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	sig := mac(cred.StoredKey, "n=user,r=cnonce,"+serverFirst+","+withoutProof)
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ sig[i]
	}
	if _, done, err := ex.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof))); err != nil || !done {
		t.Fatalf("librdkafka's nonce: done %v, %v", done, err)
	}
}

// TestEncryptedKeys: a PEM keystore's private key encrypted as PKCS#8
// (PBES2, as `openssl pkcs8 -topk8 -v2 ...` writes it; files in testdata
// made with OpenSSL 3.0) is decrypted with ssl.key.password, as Kafka's
// PEM keystore does; a wrong or missing password, PBES1 (3DES) and legacy
// encrypted PEM (Proc-Type/DEK-Info), which Kafka refuses too, fail with
// errors that say what to do.
func TestEncryptedKeys(t *testing.T) {
	cert, err := os.ReadFile("testdata/cert.pem")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, password string
		want           error  // nil: decrypted
		wantText       string // for errors without a sentinel
	}{
		{"key-pbes2-aes256-sha256.pem", "key-secret", nil, ""},
		{"key-pbes2-aes128-sha1.pem", "key-secret", nil, ""},
		{"key-pbes2-aes256-sha256.pem", "wrong", ErrKeyPassword, ""},
		{"key-pbes2-aes128-sha1.pem", "", ErrNoKeyPassword, ""},
		{"key-pbes1-3des.pem", "key-secret", nil, "only PBES2"},
		{"key-legacy.pem", "key-secret", ErrEncryptedKey, ""},
	} {
		t.Run(tc.file+"/"+tc.password, func(t *testing.T) {
			key, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			c, err := parseKeyPair(cert, key, tc.password)
			switch {
			case tc.want == nil && tc.wantText == "":
				if err != nil {
					t.Fatalf("not decrypted: %v", err)
				}
				if c.PrivateKey == nil || len(c.Certificate) != 1 {
					t.Fatalf("key pair %+v", c)
				}
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("err = %v, want %v", err, tc.want)
			case tc.wantText != "" && (err == nil || !strings.Contains(err.Error(), tc.wantText)):
				t.Fatalf("err = %v, want one saying %q", err, tc.wantText)
			}
		})
	}
}
