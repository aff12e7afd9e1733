package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// BootstrapFile is the file `samsa storage format` writes into each log dir
// with the records the cluster starts with (--add-scram), Samsa's
// counterpart of Kafka's bootstrap.checkpoint. It is JSON: an array of
// {"type": record type, "value": record}, the types and values of Encode.
const BootstrapFile = "bootstrap.json"

type bootstrapEntry struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// WriteBootstrap writes recs to dir/BootstrapFile, replacing it.
func WriteBootstrap(dir string, recs []Record) error {
	entries := make([]bootstrapEntry, 0, len(recs))
	for _, r := range recs {
		k, v, err := Encode(r)
		if err != nil {
			return err
		}
		entries = append(entries, bootstrapEntry{Type: string(k), Value: v})
	}
	data, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, BootstrapFile+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, BootstrapFile))
}

// ReadBootstrap reads the bootstrap records of the first of dirs that has a
// BootstrapFile; none is not an error. A record it cannot decode is, naming
// the file.
func ReadBootstrap(dirs []string) ([]Record, error) {
	for _, dir := range dirs {
		path := filepath.Join(dir, BootstrapFile)
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return DecodeBootstrap(data, path)
	}
	return nil, nil
}

// DecodeBootstrap decodes the contents of a BootstrapFile; name is used in
// errors.
func DecodeBootstrap(data []byte, name string) ([]Record, error) {
	var entries []bootstrapEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	recs := make([]Record, 0, len(entries))
	for i, e := range entries {
		r, err := Decode([]byte(e.Type), e.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %d: %w", name, i, err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}
