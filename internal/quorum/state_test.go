package quorum

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), StateFile)
	if _, ok, err := readState(nil, path); ok || err != nil {
		t.Fatalf("missing file: %v %v", ok, err)
	}
	want := hardState{LeaderEpoch: 7, VotedID: 0, CommitIndex: 1234}
	if err := writeState(nil, path, want); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != `{"leaderEpoch":7,"votedId":0,"commitIndex":1234,"data_version":0}`+"\n" {
		t.Fatalf("file %q", b)
	}
	got, ok, err := readState(nil, path)
	if err != nil || !ok || got != want {
		t.Fatalf("read %+v %v %v", got, ok, err)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left: %v", err)
	}
}

func TestDecodeStateErrors(t *testing.T) {
	for _, bad := range []string{
		``,
		`{`,
		`[]`,
		`{"leaderEpoch":-1,"votedId":-1,"commitIndex":0,"data_version":0}`,
		`{"leaderEpoch":1,"votedId":-2,"commitIndex":0,"data_version":0}`,
		`{"leaderEpoch":1,"votedId":1,"commitIndex":-1,"data_version":0}`,
		`{"leaderEpoch":1,"votedId":1,"commitIndex":0,"data_version":1}`,
		`{"leaderEpoch":1,"votedId":1,"commitIndex":0,"data_version":0,"x":1}`,
		`{"leaderEpoch":1,"votedId":1,"commitIndex":0,"data_version":0} {}`,
		`{"leaderEpoch":"1"}`,
		`{"leaderEpoch":99999999999999999999}`,
	} {
		if _, err := decodeState([]byte(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzDecodeState(f *testing.F) {
	f.Add(encodeState(hardState{LeaderEpoch: 3, VotedID: 2, CommitIndex: 10}))
	f.Add([]byte(`{"leaderEpoch":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeState(b)
		if err != nil {
			return
		}
		again, err := decodeState(encodeState(s))
		if err != nil || again != s {
			t.Fatalf("%+v re-decoded as %+v, %v", s, again, err)
		}
	})
}
