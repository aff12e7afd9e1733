package console

import (
	"context"
	"testing"
)

// FuzzSCRAMServer: any server-first and server-final bytes give an error
// or a finished exchange, never a panic.
func FuzzSCRAMServer(f *testing.F) {
	f.Add([]byte("r=NONCEsrv,s=c2FsdA==,i=4096"), []byte("v=AAAA"))
	f.Add([]byte("r=NONCE,s=,i=0"), []byte("e=invalid-proof"))
	f.Add([]byte("s=!!,i=x"), []byte(""))
	f.Fuzz(func(t *testing.T, first, final []byte) {
		m := newSCRAMKeys(true, "u=,", "p")
		sess, _, err := m.Authenticate(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		s := sess.(*scramSession)
		s.nonce = "NONCE" // the seeds' server nonces extend it
		if _, _, err := s.Challenge(first); err != nil {
			return
		}
		s.Challenge(final)
		s.Challenge(final)
	})
}
