package metadata

import (
	"reflect"
	"testing"
)

// FuzzDecode decodes arbitrary metadata records (keys and values as the
// metadata log holds them), seeded with the SCRAM credential records, and
// bootstrap files: no panic, and a decoded record encodes back to one that
// decodes equal.
func FuzzDecode(f *testing.F) {
	for _, r := range []Record{
		UserScramCredentialRecord{Name: "alice", Mechanism: 2, Salt: []byte{1, 2}, StoredKey: []byte{3}, ServerKey: []byte{4}, Iterations: 4096},
		RemoveUserScramCredentialRecord{Name: "alice", Mechanism: 1},
		BootstrapRecord{},
		TopicRecord{Name: "t"},
		FeatureLevelRecord{Name: FeatureTransactionVersion, FeatureLevel: 2},
	} {
		k, v, err := Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(k, v)
	}
	f.Add([]byte("user_scram_credential"), []byte(`{"name":1}`))
	f.Add([]byte("bootstrap"), []byte(`[{"type":"bootstrap","value":{}}]`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		_, _ = DecodeBootstrap(value, "fuzz")
		r, err := Decode(key, value)
		if err != nil {
			return
		}
		k2, v2, err := Encode(r)
		if err != nil {
			t.Fatalf("%T: %v", r, err)
		}
		r2, err := Decode(k2, v2)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("%#v re-decoded as %#v, %v", r, r2, err)
		}
	})
}
