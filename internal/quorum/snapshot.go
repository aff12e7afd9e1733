package quorum

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// SnapshotID names a snapshot of the metadata image, as KRaft's
// OffsetAndEpoch does (KIP-630): the image after applying every offset
// below EndOffset; Epoch is the partition leader epoch of the log's batch
// that ends at EndOffset (0 for Local).
type SnapshotID struct {
	EndOffset int64
	Epoch     int32
}

// File name suffixes of snapshots, as Kafka names them: a snapshot is
// written to <name>.checkpoint.part, then renamed.
const (
	SnapshotSuffix = ".checkpoint"
	partSuffix     = ".checkpoint.part"
)

// FileName is the snapshot's file name in the __cluster_metadata-0
// directory: %020d-%010d.checkpoint of EndOffset and Epoch, as Kafka's
// Snapshots.filenameFromSnapshotId.
func (id SnapshotID) FileName() string {
	return fmt.Sprintf("%020d-%010d%s", id.EndOffset, id.Epoch, SnapshotSuffix)
}

// parseSnapshotName parses a FileName; ok is false for any other name.
func parseSnapshotName(name string) (id SnapshotID, ok bool) {
	stem, found := strings.CutSuffix(name, SnapshotSuffix)
	if !found || len(stem) != 31 || stem[20] != '-' {
		return id, false
	}
	off, err1 := strconv.ParseInt(stem[:20], 10, 64)
	ep, err2 := strconv.ParseInt(stem[21:], 10, 32)
	if err1 != nil || err2 != nil || off < 0 || ep < 0 {
		return id, false
	}
	return SnapshotID{EndOffset: off, Epoch: int32(ep)}, true
}

// ErrCorruptSnapshot: a snapshot file is not a whole, valid snapshot (a
// bad CRC, a torn tail, a missing header or footer, a record that does
// not decode). Loading skips it for an older snapshot or the log.
var ErrCorruptSnapshot = errors.New("quorum: corrupt metadata snapshot")

// snapshotBatchBytes is about how many bytes of records a snapshot batch
// holds (Kafka's snapshot writer batches up to 8 KiB pages of records into
// batches of at most 8 MiB; one record is never split).
const snapshotBatchBytes = 1 << 20

// maxSnapshotBytes bounds the snapshot file a node reads: 1 GiB, several
// million partitions.
const maxSnapshotBytes = 1 << 30

// encodeSnapshot returns the file contents of the snapshot id of recs
// (metadata.Image.Records), in the log's batch format (KIP-630): a control
// batch holding a SNAPSHOT_HEADER record (Kafka's SnapshotHeaderRecord v0:
// version, last contained log timestamp lastTimestamp), uncompressed
// batches of the records (key = type, value = JSON, as the log holds
// them), and a control batch holding a SNAPSHOT_FOOTER record (Kafka's
// SnapshotFooterRecord v0). Batches take offsets 0, 1, … of the file and
// the partition leader epoch id.Epoch; each carries its CRC-32C. Errors:
// metadata encoding errors.
func encodeSnapshot(id SnapshotID, lastTimestamp, now int64, recs []metadata.Record) ([]byte, error) {
	var out []byte
	next := int64(0)
	add := func(control bool, rs []record.Record) error {
		b, err := buildBatch(next, id.Epoch, control, now, rs)
		if err != nil {
			return err
		}
		out = append(out, b...)
		next += int64(len(rs))
		return nil
	}
	header := binary.BigEndian.AppendUint16(nil, 0) // version
	header = binary.BigEndian.AppendUint64(header, uint64(lastTimestamp))
	header = append(header, 0) // no tagged fields
	if err := add(true, []record.Record{{Key: record.ControlKey(record.ControlSnapshotHeader), Value: header}}); err != nil {
		return nil, err
	}
	var batch []record.Record
	size := 0
	for _, r := range recs {
		k, v, err := metadata.Encode(r)
		if err != nil {
			return nil, err
		}
		batch = append(batch, record.Record{OffsetDelta: int32(len(batch)), Key: k, Value: v})
		if size += len(k) + len(v); size >= snapshotBatchBytes {
			if err := add(false, batch); err != nil {
				return nil, err
			}
			batch, size = nil, 0
		}
	}
	if len(batch) > 0 {
		if err := add(false, batch); err != nil {
			return nil, err
		}
	}
	footer := []byte{0, 0, 0} // version 0, no tagged fields
	if err := add(true, []record.Record{{Key: record.ControlKey(record.ControlSnapshotFooter), Value: footer}}); err != nil {
		return nil, err
	}
	return out, nil
}

// decodeSnapshot checks and decodes the contents of a snapshot file (see
// encodeSnapshot): every batch whole with a valid CRC, v2, at the offset
// after the previous one, of partition leader epoch epoch; a header first,
// a footer last and nothing after it; records that decode. It returns the
// records and the header's last contained log timestamp. Errors wrap
// ErrCorruptSnapshot.
func decodeSnapshot(b []byte, epoch int32) (recs []metadata.Record, lastTimestamp int64, err error) {
	next := int64(0)
	header, footer := false, false
	_, err = record.Batches(b, func(batch []byte, h record.Header) error {
		if footer {
			return errors.New("data after the footer")
		}
		if _, err := record.Validate(batch); err != nil {
			return err
		}
		if h.BaseOffset != next || int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
			return fmt.Errorf("batch at offset %d of %d records (last delta %d), expected offset %d", h.BaseOffset, h.NumRecords, h.LastOffsetDelta, next)
		}
		if h.PartitionLeaderEpoch != epoch {
			return fmt.Errorf("batch at offset %d of epoch %d, expected %d", h.BaseOffset, h.PartitionLeaderEpoch, epoch)
		}
		next = h.NextOffset()
		if !h.IsControl() {
			if !header {
				return errors.New("records before the header")
			}
			rs, err := decodeBatch(batch)
			if err != nil {
				return err
			}
			recs = append(recs, rs...)
			return nil
		}
		var typ record.ControlType
		var value []byte
		n := 0
		err := record.Records(batch, func(r record.Record) error {
			t, err := record.ParseControlKey(r.Key)
			typ, value, n = t, r.Value, n+1
			return err
		})
		switch {
		case err != nil:
			return err
		case n != 1:
			return fmt.Errorf("control batch of %d records", n)
		case typ == record.ControlSnapshotHeader && !header && next == 1:
			if len(value) < 11 || binary.BigEndian.Uint16(value) != 0 {
				return fmt.Errorf("snapshot header of %d bytes", len(value))
			}
			header, lastTimestamp = true, int64(binary.BigEndian.Uint64(value[2:]))
		case typ == record.ControlSnapshotFooter && header:
			footer = true
		default:
			return fmt.Errorf("unexpected control record %v", typ)
		}
		return nil
	})
	if err == nil && !footer {
		err = errors.New("no footer")
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrCorruptSnapshot, err)
	}
	return recs, lastTimestamp, nil
}

// writeSnapshot writes data as the snapshot id in dir so that a crash
// leaves either no snapshot id or all of it: to FileName+".part", fsynced,
// renamed to FileName, the directory fsynced (Kafka's
// FileRawSnapshotWriter does the same). Errors: I/O errors, wrapped.
func writeSnapshot(fsys vfs.FS, dir string, id SnapshotID, data []byte) error {
	path := filepath.Join(dir, id.FileName())
	part := strings.TrimSuffix(path, SnapshotSuffix) + partSuffix
	f, err := fsys.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("quorum: write snapshot: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(part, path)
	}
	if err != nil {
		fsys.Remove(part)
		return fmt.Errorf("quorum: write snapshot %s: %w", path, err)
	}
	if err := vfs.SyncPath(fsys, dir); err != nil {
		return fmt.Errorf("quorum: write snapshot %s: sync directory: %w", path, err)
	}
	return nil
}

// removePartFiles removes the .checkpoint.part files a crash left behind
// in dir. Only at start, before any snapshot is written: a writer's .part
// removed under it would fail its rename. Errors: reading the directory;
// a file that cannot be removed is left (it is ignored by listSnapshots
// and truncated by the next write of the same snapshot id).
func removePartFiles(fsys vfs.FS, dir string) error {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("quorum: remove snapshot leftovers: %w", err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), partSuffix) {
			fsys.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

// listSnapshots returns the snapshots in dir, newest (highest EndOffset)
// first; .checkpoint.part files are not listed (and not removed: see
// removePartFiles). Errors: reading the directory.
func listSnapshots(fsys vfs.FS, dir string) ([]SnapshotID, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("quorum: list snapshots: %w", err)
	}
	var ids []SnapshotID
	for _, e := range ents {
		if id, ok := parseSnapshotName(e.Name()); ok {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b SnapshotID) int {
		if c := cmp.Compare(b.EndOffset, a.EndOffset); c != 0 {
			return c
		}
		return cmp.Compare(b.Epoch, a.Epoch)
	})
	return ids, nil
}

// readSnapshot reads and decodes the snapshot id in dir; size is the
// file's. Errors: ErrCorruptSnapshot (wrapped), I/O errors.
func readSnapshot(fsys vfs.FS, dir string, id SnapshotID) (recs []metadata.Record, size int64, err error) {
	f, err := vfs.Open(fsys, filepath.Join(dir, id.FileName()))
	if err != nil {
		return nil, 0, fmt.Errorf("quorum: read snapshot: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSnapshotBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("quorum: read snapshot %s: %w", id.FileName(), err)
	}
	if len(b) > maxSnapshotBytes {
		return nil, 0, fmt.Errorf("%w: %s larger than %d bytes", ErrCorruptSnapshot, id.FileName(), maxSnapshotBytes)
	}
	recs, _, err = decodeSnapshot(b, id.Epoch)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", id.FileName(), err)
	}
	return recs, int64(len(b)), nil
}
