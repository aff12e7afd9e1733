package storage

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/samsahq/samsa/internal/storage/vfs"
)

// Checkpoint file names in a log dir (Kafka's).
const (
	RecoveryPointCheckpointFile     = "recovery-point-offset-checkpoint"
	LogStartOffsetCheckpointFile    = "log-start-offset-checkpoint"
	ReplicationOffsetCheckpointFile = "replication-offset-checkpoint"
	CleanerOffsetCheckpointFile     = "cleaner-offset-checkpoint"
	// CleanShutdownFile marks a log dir whose logs were all closed cleanly.
	// It holds the broker epoch of the process that closed them, as
	// Kafka's CleanShutdownFileHandler writes it (KIP-966): a JSON object
	// of strings, {"version":"0","broker_epoch":"N"}.
	CleanShutdownFile = ".kafka_cleanshutdown"
)

// encodeCleanShutdown is the content of CleanShutdownFile: Kafka's
// fields (string values, as Kafka's handler writes and reads them into a
// map of strings) and Samsa's "samsa_manifest_id" when a ManifestFile was
// written just before the marker: the manifest is trusted only with the
// marker that names it. Kafka's reader ignores the field; a marker written
// by another program (an older Samsa, Kafka) has none, and the manifest
// found with it is not read.
func encodeCleanShutdown(brokerEpoch int64, manifestID string) []byte {
	c := map[string]string{"version": "0", "broker_epoch": strconv.FormatInt(brokerEpoch, 10)}
	if manifestID != "" {
		c["samsa_manifest_id"] = manifestID
	}
	b, _ := json.Marshal(c) // cannot fail: strings only
	return b
}

// decodeCleanShutdown returns the broker epoch of a CleanShutdownFile's
// content, or -1 when it holds none: empty (written by Samsa before it
// recorded the epoch), not a JSON object, or a version other than 0; and
// the id of the ManifestFile it vouches for, empty when none. It reads
// Kafka's form (string values, "broker_epoch") and the one Samsa wrote
// before (numbers, "brokerEpoch", "samsaManifestId").
func decodeCleanShutdown(b []byte) (epoch int64, manifestID string) {
	var c map[string]json.RawMessage
	if err := json.Unmarshal(b, &c); err != nil {
		return -1, ""
	}
	// field is a number or a string holding one; ok is false when absent
	// or neither.
	field := func(names ...string) (int64, bool) {
		for _, name := range names {
			raw, found := c[name]
			if !found {
				continue
			}
			var str string
			if json.Unmarshal(raw, &str) == nil {
				raw = []byte(str)
			}
			n, err := strconv.ParseInt(string(raw), 10, 64)
			return n, err == nil
		}
		return 0, false
	}
	if v, ok := field("version"); !ok || v != 0 {
		return -1, ""
	}
	epoch, ok := field("broker_epoch", "brokerEpoch")
	if !ok {
		epoch = -1
	}
	for _, name := range []string{"samsa_manifest_id", "samsaManifestId"} {
		if raw, found := c[name]; found {
			json.Unmarshal(raw, &manifestID) // a non-string leaves it empty
			break
		}
	}
	return max(epoch, -1), manifestID
}

// ErrCorruptCheckpoint reports a checkpoint file that does not parse.
var ErrCorruptCheckpoint = errors.New("storage: corrupt checkpoint file")

// maxCheckpointLine bounds the length of one line of a checkpoint file.
const maxCheckpointLine = 4096

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is the partition's directory name, <topic>-<partition>.
func (tp TopicPartition) String() string { return tp.Topic + "-" + strconv.Itoa(int(tp.Partition)) }

// ParseTopicPartition parses a partition directory name, <topic>-<partition>,
// splitting at the last '-' (topics may contain '-'). ok is false for a
// name without a valid topic or a non-negative decimal partition.
func ParseTopicPartition(name string) (tp TopicPartition, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return tp, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || name[i+1] == '+' {
		return tp, false
	}
	tp = TopicPartition{Topic: name[:i], Partition: int32(p)}
	return tp, ValidTopic(tp.Topic) == nil
}

// ValidTopic checks a topic name as Kafka does: 1 to 249 characters from
// [a-zA-Z0-9._-], and neither "." nor "..".
func ValidTopic(topic string) error {
	if topic == "" || topic == "." || topic == ".." || len(topic) > 249 {
		return fmt.Errorf("storage: invalid topic name %q", topic)
	}
	for _, c := range []byte(topic) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("storage: invalid character %q in topic name %q", c, topic)
		}
	}
	return nil
}

// ParseCheckpoint decodes a Kafka checkpoint file: a version line that must
// equal version, a count line, then count lines of exactly fields
// space-separated fields. Errors: ErrCorruptCheckpoint (wrapped) for any
// other shape, including extra or missing lines. It allocates no more than
// the input's size, whatever the count says.
func ParseCheckpoint(data []byte, version, fields int) ([][]string, error) {
	lines := strings.Split(string(data), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	if len(lines) < 2 {
		return nil, fmt.Errorf("%w: %d lines", ErrCorruptCheckpoint, len(lines))
	}
	for i, l := range lines {
		if len(l) > maxCheckpointLine {
			return nil, fmt.Errorf("%w: line %d is %d bytes", ErrCorruptCheckpoint, i+1, len(l))
		}
	}
	v, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || v != version {
		return nil, fmt.Errorf("%w: version %q, want %d", ErrCorruptCheckpoint, lines[0], version)
	}
	count, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || count < 0 || count != len(lines)-2 {
		return nil, fmt.Errorf("%w: count %q with %d entries", ErrCorruptCheckpoint, lines[1], len(lines)-2)
	}
	out := make([][]string, 0, count)
	for i, l := range lines[2:] {
		f := strings.Split(l, " ")
		if len(f) != fields || slices.Contains(f, "") {
			return nil, fmt.Errorf("%w: line %d %q", ErrCorruptCheckpoint, i+3, l)
		}
		out = append(out, f)
	}
	return out, nil
}

// EncodeCheckpoint is the file form of lines (see ParseCheckpoint).
func EncodeCheckpoint(version int, lines [][]string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", version, len(lines))
	for _, l := range lines {
		b.WriteString(strings.Join(l, " "))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// DecodeOffsetCheckpoint decodes a version 0 "topic partition offset"
// checkpoint (recovery points, log start offsets, high-watermarks, cleaner
// offsets). Errors: ErrCorruptCheckpoint (wrapped), including a bad topic
// name, partition or offset, or a partition listed twice.
func DecodeOffsetCheckpoint(data []byte) (map[TopicPartition]int64, error) {
	lines, err := ParseCheckpoint(data, 0, 3)
	if err != nil {
		return nil, err
	}
	out := make(map[TopicPartition]int64, len(lines))
	for _, l := range lines {
		p, perr := strconv.ParseInt(l[1], 10, 32)
		off, oerr := strconv.ParseInt(l[2], 10, 64)
		tp := TopicPartition{Topic: l[0], Partition: int32(p)}
		if perr != nil || oerr != nil || p < 0 || ValidTopic(l[0]) != nil {
			return nil, fmt.Errorf("%w: entry %q", ErrCorruptCheckpoint, strings.Join(l, " "))
		}
		if _, dup := out[tp]; dup {
			return nil, fmt.Errorf("%w: %s listed twice", ErrCorruptCheckpoint, tp)
		}
		out[tp] = off
	}
	return out, nil
}

// EncodeOffsetCheckpoint is the file form of offsets, sorted by topic and
// partition.
func EncodeOffsetCheckpoint(offsets map[TopicPartition]int64) []byte {
	tps := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTopicPartition)
	offs := make([]int64, len(tps))
	for i, tp := range tps {
		offs[i] = offsets[tp]
	}
	return encodeOffsets(tps, offs)
}

func compareTopicPartition(a, b TopicPartition) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// encodeOffsets is the file form of offs[i] for each tps[i], in the
// order given (sorted by the callers, as Kafka's files are).
func encodeOffsets(tps []TopicPartition, offs []int64) []byte {
	// EncodeCheckpoint's bytes, appended in place: with a slice of
	// strings per line a node of 100,000 partitions made 300,000
	// allocations per file, four files at each clean shutdown.
	n := 0
	for _, tp := range tps {
		n += len(tp.Topic) + 2*20 + 3
	}
	b := make([]byte, 0, n+32)
	b = append(b, "0\n"...)
	b = strconv.AppendInt(b, int64(len(tps)), 10)
	b = append(b, '\n')
	for i, tp := range tps {
		b = append(b, tp.Topic...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(tp.Partition), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, offs[i], 10)
		b = append(b, '\n')
	}
	return b
}

// dirCheckpointEntry is one log's line in each of the offset checkpoints
// Manager writes in its log dir.
type dirCheckpointEntry struct {
	tp             TopicPartition
	recoveryPoint  int64
	logStartOffset int64
	cleanerOffset  int64 // -1: none (the log is not in cleaner-offset-checkpoint)
}

// writeDirCheckpoints replaces the recovery-point-offset-checkpoint,
// log-start-offset-checkpoint and cleaner-offset-checkpoint of log dir
// dir with entries (in any order: they are sorted here, once for the
// three files), together (writeFilesAtomic).
func writeDirCheckpoints(fsys vfs.FS, dir string, entries []dirCheckpointEntry) error {
	slices.SortFunc(entries, func(a, b dirCheckpointEntry) int { return compareTopicPartition(a.tp, b.tp) })
	tps := make([]TopicPartition, len(entries))
	rps, lsos := make([]int64, len(entries)), make([]int64, len(entries))
	var cleanedTPs []TopicPartition
	var cleaned []int64
	for i, e := range entries {
		tps[i], rps[i], lsos[i] = e.tp, e.recoveryPoint, e.logStartOffset
		if e.cleanerOffset >= 0 {
			cleanedTPs, cleaned = append(cleanedTPs, e.tp), append(cleaned, e.cleanerOffset)
		}
	}
	return writeFilesAtomic(fsys, dir, []fileData{
		{RecoveryPointCheckpointFile, encodeOffsets(tps, rps)},
		{LogStartOffsetCheckpointFile, encodeOffsets(tps, lsos)},
		{CleanerOffsetCheckpointFile, encodeOffsets(cleanedTPs, cleaned)},
	})
}

// ReadOffsetCheckpoint reads a "topic partition offset" checkpoint file
// of fsys (nil: vfs.Default). A missing file gives an empty map and no
// error. Errors: ErrCorruptCheckpoint (wrapped with the path), I/O errors.
func ReadOffsetCheckpoint(fsys vfs.FS, path string) (map[TopicPartition]int64, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	data, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, os.ErrNotExist) {
		return map[TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	m, err := DecodeOffsetCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return m, nil
}

// WriteOffsetCheckpoint replaces the checkpoint file at path with offsets,
// atomically (WriteFileAtomic), on fsys (nil: vfs.Default).
func WriteOffsetCheckpoint(fsys vfs.FS, path string, offsets map[TopicPartition]int64) error {
	if fsys == nil {
		fsys = vfs.Default
	}
	return writeFile(fsys, path, EncodeOffsetCheckpoint(offsets), true)
}

// WriteFileAtomic replaces the file at path of fsys (nil: vfs.Default)
// with data so that a crash leaves either the old or the new contents: it
// writes path+".tmp", fsyncs it, renames it over path and fsyncs the
// directory. On error the old file is in place and the temporary one
// removed. Not safe for concurrent use on the same path.
func WriteFileAtomic(fsys vfs.FS, path string, data []byte) error {
	if fsys == nil {
		fsys = vfs.Default
	}
	return writeFile(fsys, path, data, true)
}

// fileData is one file of writeFilesAtomic: its name in the directory
// and its contents.
type fileData struct {
	name string
	data []byte
}

// writeFilesAtomic replaces files, of directory dir, as WriteFileAtomic
// replaces each, with one wait on the disk for all rather than two a
// file: it writes each name+".tmp", fsyncs them all at once (a goroutine
// each: ext4's and XFS's journals commit concurrent fsyncs together),
// renames each over its name, then fsyncs dir once. A crash leaves each
// file old or new. A failed write or fsync replaces no file (the
// temporary ones are removed); a failed rename leaves the files before it
// replaced. Errors name the file; they are joined.
func writeFilesAtomic(fsys vfs.FS, dir string, files []fileData) error {
	tmps := make([]vfs.File, len(files))
	errs := make([]error, len(files))
	for i, f := range files {
		tmps[i], errs[i] = fsys.OpenFile(filepath.Join(dir, f.name+".tmp"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if errs[i] == nil {
			_, errs[i] = tmps[i].Write(f.data)
		}
	}
	var wg sync.WaitGroup
	for i, t := range tmps {
		if errs[i] == nil {
			wg.Go(func() { errs[i] = t.Sync() })
		}
	}
	wg.Wait()
	failed := false
	for i, t := range tmps {
		if t != nil {
			if err := t.Close(); errs[i] == nil {
				errs[i] = err
			}
		}
		failed = failed || errs[i] != nil
	}
	renamed := 0
	for i, f := range files {
		if failed {
			break
		}
		path := filepath.Join(dir, f.name)
		errs[i] = fsys.Rename(path+".tmp", path)
		failed = errs[i] != nil
		if !failed {
			renamed++
		}
	}
	for i, f := range files[renamed:] {
		path := filepath.Join(dir, f.name)
		fsys.Remove(path + ".tmp") // the error that matters is errs'
		if err := errs[renamed+i]; err != nil {
			errs[renamed+i] = fmt.Errorf("storage: write %s: %w", path, err)
		}
	}
	if renamed > 0 {
		errs = append(errs, syncDir(fsys, dir))
	}
	return errors.Join(errs...)
}

// writeFileRenamed is WriteFileAtomic without the fsyncs: a crash of the
// machine may leave the old file, or an empty or partial one.
func writeFileRenamed(fsys vfs.FS, path string, data []byte) error {
	return writeFile(fsys, path, data, false)
}

func writeFile(fsys vfs.FS, path string, data []byte, sync bool) error {
	return writeFileFunc(fsys, path, sync, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeFileFunc is writeFile with the data written by write, which may
// stream it in parts.
func writeFileFunc(fsys vfs.FS, path string, sync bool, write func(io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	err = write(f)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("storage: write %s: %w", path, err)
	}
	if !sync {
		return nil
	}
	return syncDir(fsys, filepath.Dir(path))
}
