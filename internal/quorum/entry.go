package quorum

import (
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
)

// MaxEntryBytes bounds one Append of Raft: the encoded batch of its
// records (Kafka's KafkaRaftClient caps a metadata batch at 8 MiB too).
const MaxEntryBytes = 8 << 20

// Errors callers branch on.
var (
	// ErrNotLeader: Append on a voter that is not the leader, or whose
	// leadership ended before the entry committed (the entry may still be
	// committed by the next leader: the commit stream of Register is the
	// truth). The controller answers NOT_CONTROLLER.
	ErrNotLeader = errors.New("quorum: not the leader")
	// ErrDropped: the leader refused the proposal (a leadership transfer in
	// progress, or too many uncommitted entries); retry later.
	ErrDropped = errors.New("quorum: proposal dropped")
	// ErrEntryTooLarge: the records of one Append encode to more than
	// MaxEntryBytes.
	ErrEntryTooLarge = errors.New("quorum: entry too large")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("quorum: closed")
	// ErrFormat: the metadata log or quorum-state file is not what this
	// package writes (for Raft: a log written by Local, one with compacted
	// history, or a malformed quorum-state).
	ErrFormat = errors.New("quorum: unexpected metadata log format")
)

// encodeEntry builds the batch of one Raft entry: recs as Local writes
// them (one record each, at consecutive offsets), base offset 0 and
// partition leader epoch -1 until the log stamps them. Errors:
// ErrEntryTooLarge, metadata encoding errors.
func encodeEntry(recs []metadata.Record, now int64) ([]byte, error) {
	b, err := encodeBatch(recs, now)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxEntryBytes {
		return nil, fmt.Errorf("%w: %d records in %d bytes, at most %d", ErrEntryTooLarge, len(recs), len(b), MaxEntryBytes)
	}
	return b, nil
}

// leaderChangeBatch is the control batch that stores raft's empty entry
// (the first entry of every leader's term): one LEADER_CHANGE control
// record (KIP-595) at offset, stamped with epoch. leader is the node id of
// the leader when known at write time, else -1.
func leaderChangeBatch(offset int64, epoch int32, leader int32, voters []int32, now int64) ([]byte, error) {
	msg := kmsg.LeaderChangeMessage{Version: 0, LeaderID: leader}
	for _, v := range voters {
		msg.Voters = append(msg.Voters, kmsg.LeaderChangeMessageVoter{VoterID: v})
	}
	return buildBatch(offset, epoch, true, now, []record.Record{{Key: record.ControlKey(record.ControlLeaderChange), Value: msg.AppendTo(nil)}})
}

// buildBatch builds an uncompressed v2 batch of rs, without a producer, as
// the metadata log and its snapshots hold them: at offset, of partition
// leader epoch epoch, a control batch when control is set.
func buildBatch(offset int64, epoch int32, control bool, now int64, rs []record.Record) ([]byte, error) {
	return record.Build(record.Spec{
		BaseOffset:           offset,
		PartitionLeaderEpoch: epoch,
		Control:              control,
		BaseTimestamp:        now,
		ProducerID:           record.NoProducerID,
		ProducerEpoch:        record.NoProducerEpoch,
		BaseSequence:         record.NoSequence,
	}, rs)
}

// checkEntryData checks the data of a raft entry received from a peer or
// about to be stored: exactly one whole v2 batch with a valid CRC, not a
// control batch, of at most MaxEntryBytes, with one record per offset (no
// gaps: the batch spans as many offsets as it has records). Empty data
// (raft's own empty entry) is valid too and gives a zero header. Errors
// wrap record.ErrCorrupt, ErrEntryTooLarge or ErrFormat.
func checkEntryData(data []byte) (record.Header, error) {
	if len(data) == 0 {
		return record.Header{}, nil
	}
	if len(data) > MaxEntryBytes {
		return record.Header{}, fmt.Errorf("%w: entry of %d bytes", ErrEntryTooLarge, len(data))
	}
	h, err := record.Validate(data)
	if err != nil {
		return h, err
	}
	if h.IsControl() || h.NumRecords < 1 || int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
		return h, fmt.Errorf("%w: entry batch with %d records, last offset delta %d, control %v", ErrFormat, h.NumRecords, h.LastOffsetDelta, h.IsControl())
	}
	return h, nil
}

// decodeBatch returns the metadata records of one batch of the metadata
// log, one per record (key = type, value = JSON body). A control batch
// has none. Errors: record decoding errors, metadata.ErrUnknownRecord and
// JSON errors, wrapped.
func decodeBatch(b []byte) ([]metadata.Record, error) {
	h, err := record.ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if h.IsControl() {
		return nil, nil
	}
	var out []metadata.Record
	err = record.Records(b, func(r record.Record) error {
		m, err := metadata.Decode(r.Key, r.Value)
		if err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	return out, err
}

// readChunk is how many bytes of batches readBatches reads at once.
const readChunk = 1 << 20

// errStop ends an iteration early without an error.
var errStop = errors.New("stop")

// readBatches calls fn, in offset order, for each batch of l that holds an
// offset in [from, to), reading at most readChunk bytes at a time (a larger
// batch is read whole). The first batch may start below from (Local's
// batches hold several offsets). fn returning errStop ends the iteration
// with a nil error. Errors: storage read errors, ErrFormat for a hole in the
// offsets below to, record decoding errors.
func readBatches(l *storage.Log, from, to int64, fn func(b []byte, h record.Header) error) error {
	off := from
	for off < to {
		res, err := l.Read(off, readChunk, to, true)
		if err != nil {
			return err
		}
		if len(res.Records) == 0 {
			return fmt.Errorf("%w: no batch at offset %d, below %d", ErrFormat, off, to)
		}
		_, err = record.Batches(res.Records, func(b []byte, h record.Header) error {
			if h.NextOffset() <= off {
				return fmt.Errorf("%w: batch at offset %d does not move past %d", ErrFormat, h.BaseOffset, off)
			}
			if err := fn(b, h); err != nil {
				return err
			}
			off = h.NextOffset()
			return nil
		})
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkedEpoch converts a raft term to a partition leader epoch.
func checkedEpoch(term uint64) (int32, error) {
	if term > math.MaxInt32 {
		return 0, fmt.Errorf("%w: term %d does not fit a partition leader epoch", ErrFormat, term)
	}
	return int32(term), nil
}
