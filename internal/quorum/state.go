package quorum

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// StateFile is the name of the file, in the __cluster_metadata-0
// directory, that keeps a voter's raft hard state (Kafka keeps its
// election state in a quorum-state file there too).
const StateFile = "quorum-state"

// maxStateBytes bounds the quorum-state file read.
const maxStateBytes = 4096

// hardState is raft's HardState in our terms: the term is the leader
// epoch and the vote a node id.
type hardState struct {
	LeaderEpoch int64 `json:"leaderEpoch"`  // raft term, ≥ 0
	VotedID     int32 `json:"votedId"`      // node voted for in LeaderEpoch, -1 for none
	CommitIndex int64 `json:"commitIndex"`  // raft commit index: entries (batches) 1..CommitIndex are committed, ≥ 0
	DataVersion int   `json:"data_version"` // 0
}

// encodeState returns the file contents for s.
func encodeState(s hardState) []byte {
	b, _ := json.Marshal(s) // cannot fail: plain fields
	return append(b, '\n')
}

// decodeState parses the quorum-state file. Errors wrap ErrFormat: not one
// JSON object of the fields above, an unknown field, data_version other
// than 0, or a value out of range.
func decodeState(b []byte) (hardState, error) {
	var s hardState
	if len(b) > maxStateBytes {
		return s, fmt.Errorf("%w: %s of %d bytes", ErrFormat, StateFile, len(b))
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		return hardState{}, fmt.Errorf("%w: %s: %v", ErrFormat, StateFile, err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return hardState{}, fmt.Errorf("%w: %s: trailing data", ErrFormat, StateFile)
	}
	if s.DataVersion != 0 || s.LeaderEpoch < 0 || s.VotedID < -1 || s.CommitIndex < 0 {
		return hardState{}, fmt.Errorf("%w: %s: %+v", ErrFormat, StateFile, s)
	}
	return s, nil
}

// readState reads the quorum-state file at path of fsys (nil:
// vfs.Default); ok is false when it does not exist.
func readState(fsys vfs.FS, path string) (s hardState, ok bool, err error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	f, err := vfs.Open(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("quorum: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return s, false, fmt.Errorf("quorum: read %s: %w", path, err)
	}
	s, err = decodeState(b)
	return s, err == nil, err
}

// writeState replaces the quorum-state file at path of fsys (nil:
// vfs.Default) atomically
// (written to a temporary file, fsynced, renamed, directory fsynced).
func writeState(fsys vfs.FS, path string, s hardState) error {
	return storage.WriteFileAtomic(fsys, path, encodeState(s))
}
