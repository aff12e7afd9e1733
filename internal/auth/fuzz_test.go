package auth

import (
	"encoding/pem"
	"os"
	"testing"
)

// FuzzSASLExchanges feeds arbitrary client messages to the PLAIN, SCRAM
// (client-first, then client-final) and OAUTHBEARER parsers: they fail with
// ErrAuthentication or succeed, never panic.
func FuzzSASLExchanges(f *testing.F) {
	f.Add([]byte("\x00alice\x00secret"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte("n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"), []byte("c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="))
	f.Add([]byte("n,a=x,\x01auth=Bearer a.b.c\x01\x01"), []byte{})
	f.Add([]byte("y,,n=a=2Cb,r=x"), []byte("c=eSws,r=x,p="))
	cred, err := NewScramCredential(ScramSHA256, "pencil", 4096)
	if err != nil {
		f.Fatal(err)
	}
	lookup := func(string, string) (ScramCredential, bool) { return cred, true }
	f.Fuzz(func(t *testing.T, first, final []byte) {
		_, _, _, _ = ParsePlain(first)
		_, _, _ = (&plainExchange{users: map[string]string{"alice": "secret"}}).Step(first)
		_, _, _ = ParseOAuthBearer(first)
		_, _, _, _, _, _ = ParseScramClientFirst(string(first))
		_, _, _, _, _ = ParseScramClientFinal(string(final))
		ex := newScramExchange("SCRAM-SHA-256", lookup)
		if _, done, err := ex.Step(first); err == nil && !done {
			ex.Step(final)
		}
	})
}

// FuzzDecryptPKCS8 feeds arbitrary DER to the encrypted PKCS#8 decoder
// (ssl.key.password), seeded with OpenSSL's PBES2 and PBES1 keys: it
// returns a key or an error, never panics, and never works past its
// iteration bound.
func FuzzDecryptPKCS8(f *testing.F) {
	for _, name := range []string{"key-pbes2-aes256-sha256.pem", "key-pbes2-aes128-sha1.pem", "key-pbes1-3des.pem"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := pem.Decode(data)
		f.Add(b.Bytes, "key-secret")
	}
	f.Fuzz(func(t *testing.T, der []byte, password string) {
		_, _ = decryptPKCS8(der, password)
	})
}
