package storage

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/samsahq/samsa/internal/storage/vfs"
)

// PartitionMetadataFile is the file in each partition directory naming
// the topic id the log belongs to (Kafka's PartitionMetadataFile, KIP-516).
const PartitionMetadataFile = "partition.metadata"

// ErrCorruptPartitionMetadata reports a partition.metadata that does not
// parse: a missing or misnamed line, a negative version, a topic id that
// is not 16 bytes of URL-safe base64 or is all zeros.
var ErrCorruptPartitionMetadata = errors.New("storage: corrupt partition.metadata")

// EncodePartitionMetadata returns the file form of partition.metadata for
// topic id, as Kafka writes it (version 0, no newline after the id):
//
//	version: 0
//	topic_id: <22 characters of URL-safe base64, unpadded>
func EncodePartitionMetadata(id [16]byte) []byte {
	return []byte("version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(id[:]))
}

// DecodePartitionMetadata decodes partition.metadata as Kafka's
// PartitionMetadataReadBuffer does: the first line is "version:" and a
// version of 0 or more (a later version is read as 0), the second
// "topic_id:" and the id, each key separated from its value by a colon
// and at least one blank; later lines are ignored. Lines end in "\n",
// "\r\n" or "\r". Errors: ErrCorruptPartitionMetadata (wrapped).
func DecodePartitionMetadata(data []byte) ([16]byte, error) {
	var id [16]byte
	rest := string(data)
	var lines [2]string
	for i := range lines {
		if rest == "" {
			return id, fmt.Errorf("%w: %d lines, want 2", ErrCorruptPartitionMetadata, i)
		}
		lines[i], rest = nextLine(rest)
	}
	v, ok := partitionMetadataValue(lines[0], "version")
	if !ok {
		return id, fmt.Errorf("%w: line %q", ErrCorruptPartitionMetadata, lines[0])
	}
	version, err := strconv.ParseInt(v, 10, 32)
	if err != nil || version < 0 {
		return id, fmt.Errorf("%w: version %q", ErrCorruptPartitionMetadata, v)
	}
	s, ok := partitionMetadataValue(lines[1], "topic_id")
	if !ok {
		return id, fmt.Errorf("%w: line %q", ErrCorruptPartitionMetadata, lines[1])
	}
	if len(s) == 24 && strings.HasSuffix(s, "==") {
		s = s[:22] // Java's URL decoder takes the padded form too
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("%w: topic id %q", ErrCorruptPartitionMetadata, s)
	}
	copy(id[:], b)
	if id == ([16]byte{}) {
		return id, fmt.Errorf("%w: zero topic id", ErrCorruptPartitionMetadata)
	}
	return id, nil
}

// nextLine splits s after its first line, ended by "\n", "\r\n" or "\r"
// (Java's BufferedReader.readLine) or by the end of s.
func nextLine(s string) (line, rest string) {
	i := strings.IndexAny(s, "\r\n")
	if i < 0 {
		return s, ""
	}
	if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
		return s[:i], s[i+2:]
	}
	return s[:i], s[i+1:]
}

// partitionMetadataValue splits line at its first colon followed by one
// or more blanks (Kafka's ":\s+") and returns the value when the key is
// key.
func partitionMetadataValue(line, key string) (string, bool) {
	for i := 0; i < len(line); i++ {
		if line[i] != ':' {
			continue
		}
		j := i + 1
		for j < len(line) && isJavaSpace(line[j]) {
			j++
		}
		if j == i+1 {
			continue
		}
		return line[j:], line[:i] == key
	}
	return "", false
}

// isJavaSpace is Java's regex \s: space, tab, newline, vertical tab, form
// feed, carriage return.
func isJavaSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// topicIDState is what a Log knows of its partition.metadata.
type topicIDState uint8

const (
	topicIDUnread topicIDState = iota // not looked for yet
	topicIDNone                       // no file, or one that does not decode
	topicIDKnown                      // read or written: Log.topicID
)

// TopicID returns the topic id of the log's partition.metadata, reading
// the file the first time (a log loaded at start from its files has not
// read it; one loaded from the log manifest knows the id it had at the
// clean shutdown, unless it had none then). ok is false when the log has none: a log
// made by an older Samsa, by CreateTopic without an id, or whose file
// was lost or torn by a power loss (it is written without an fsync) or
// does not decode (logged). Errors: I/O errors other than a missing
// file. Safe for concurrent use.
func (l *Log) TopicID() (id [16]byte, ok bool, err error) {
	l.idMu.Lock()
	defer l.idMu.Unlock()
	if l.idState == topicIDUnread {
		path := filepath.Join(l.dir, PartitionMetadataFile)
		data, err := vfs.ReadFile(l.fsys, path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			l.idState = topicIDNone
		case err != nil:
			return id, false, fmt.Errorf("storage: read %s: %w", path, err)
		default:
			if l.topicID, err = DecodePartitionMetadata(data); err != nil {
				l.logger.Warn("ignoring partition.metadata: its topic id is taken from the metadata", "err", err)
				l.idState = topicIDNone
			} else {
				l.idState = topicIDKnown
			}
		}
	}
	return l.topicID, l.idState == topicIDKnown, nil
}

// KnownTopicID is TopicID without I/O: ok is false when the file was not
// read yet too.
func (l *Log) KnownTopicID() (id [16]byte, ok bool) {
	l.idMu.Lock()
	defer l.idMu.Unlock()
	return l.topicID, l.idState == topicIDKnown
}

// SetTopicID writes id to the log's partition.metadata when it does not
// hold it already (Kafka's PartitionMetadataFile.record and maybeFlush,
// for a log whose topic id was not known: one of an older data dir). The
// file is replaced through a temporary file, without an fsync: the log
// dir's syncfs at a clean shutdown makes it durable, and a power loss
// before that leaves a log without one, whose id is taken again. Errors:
// I/O errors (the id is not recorded then). Safe for concurrent use.
func (l *Log) SetTopicID(id [16]byte) error {
	l.idMu.Lock()
	defer l.idMu.Unlock()
	if l.idState == topicIDKnown && l.topicID == id {
		return nil
	}
	if err := writeFile(l.fsys, filepath.Join(l.dir, PartitionMetadataFile), EncodePartitionMetadata(id), false); err != nil {
		return err
	}
	l.topicID, l.idState = id, topicIDKnown
	return nil
}

// initTopicID writes partition.metadata into the directory of a log
// just created (CreateTopic): straight to its name, as the file is new (no
// temporary file and rename; a torn file after a power loss reads as
// none, see TopicID), with no fsync.
func (l *Log) initTopicID(id [16]byte) error {
	l.idMu.Lock()
	defer l.idMu.Unlock()
	path := filepath.Join(l.dir, PartitionMetadataFile)
	f, err := l.fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	_, err = f.Write(EncodePartitionMetadata(id))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("storage: write %s: %w", path, err)
	}
	l.topicID, l.idState = id, topicIDKnown
	return nil
}
