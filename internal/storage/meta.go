package storage

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/samsahq/samsa/internal/storage/vfs"
)

// MetaPropertiesFile is the name of the file that ties a log dir to a
// cluster and a node.
const MetaPropertiesFile = "meta.properties"

// ErrCorruptMetaProperties reports a meta.properties that does not parse or
// lacks a required field.
var ErrCorruptMetaProperties = errors.New("storage: corrupt meta.properties")

// MetaProperties is a log dir's meta.properties in Kafka's KRaft format
// (version=1): which cluster and node the dir belongs to, and the dir's own
// id (KIP-858).
type MetaProperties struct {
	Version     int    // version: 1 (KRaft); 0 (ZooKeeper, broker.id) is read too
	NodeID      int32  // node.id (broker.id in version 0)
	ClusterID   string // cluster.id
	DirectoryID string // directory.id, empty if absent
}

// ParseProperties decodes the subset of Java's properties format that
// Kafka's files use: one key=value (or key:value) a line, '#' and '!'
// comments, surrounding blanks trimmed. It does not handle escapes or
// continued lines. Errors: ErrCorruptMetaProperties for a line without a
// separator or a line longer than 64 KiB.
func ParseProperties(data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return nil, fmt.Errorf("%w: line %q", ErrCorruptMetaProperties, line)
		}
		out[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptMetaProperties, err)
	}
	return out, nil
}

// DecodeMetaProperties decodes meta.properties. Errors:
// ErrCorruptMetaProperties (wrapped) for an unknown version, or a missing
// or malformed node id or cluster id.
func DecodeMetaProperties(data []byte) (MetaProperties, error) {
	var m MetaProperties
	p, err := ParseProperties(data)
	if err != nil {
		return m, err
	}
	v, err := strconv.Atoi(p["version"])
	if err != nil || (v != 0 && v != 1) {
		return m, fmt.Errorf("%w: version %q", ErrCorruptMetaProperties, p["version"])
	}
	m.Version = v
	key := "node.id"
	if v == 0 {
		key = "broker.id"
	}
	id, err := strconv.ParseInt(p[key], 10, 32)
	if err != nil || id < 0 {
		return m, fmt.Errorf("%w: %s %q", ErrCorruptMetaProperties, key, p[key])
	}
	m.NodeID = int32(id)
	m.ClusterID = p["cluster.id"]
	if m.ClusterID == "" {
		return m, fmt.Errorf("%w: no cluster.id", ErrCorruptMetaProperties)
	}
	m.DirectoryID = p["directory.id"]
	return m, nil
}

// Encode returns the file form, as Kafka writes it (a comment with the
// time, then the properties).
func (m MetaProperties) Encode(now time.Time) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "#\n#%s\n", now.UTC().Format(time.UnixDate))
	if m.Version == 0 {
		fmt.Fprintf(&b, "broker.id=%d\n", m.NodeID)
	} else {
		fmt.Fprintf(&b, "node.id=%d\n", m.NodeID)
	}
	if m.DirectoryID != "" {
		fmt.Fprintf(&b, "directory.id=%s\n", m.DirectoryID)
	}
	fmt.Fprintf(&b, "version=%d\ncluster.id=%s\n", m.Version, m.ClusterID)
	return b.Bytes()
}

// ReadMetaProperties reads the meta.properties file at path. A missing file
// gives an error satisfying errors.Is(err, os.ErrNotExist).
func ReadMetaProperties(path string) (MetaProperties, error) {
	return readMetaProperties(vfs.Default, path)
}

func readMetaProperties(fsys vfs.FS, path string) (MetaProperties, error) {
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return MetaProperties{}, err
	}
	m, err := DecodeMetaProperties(data)
	if err != nil {
		return m, fmt.Errorf("%w (%s)", err, path)
	}
	return m, nil
}

// WriteMetaProperties replaces the file at path atomically.
func WriteMetaProperties(path string, m MetaProperties) error {
	return writeFile(vfs.Default, path, m.Encode(time.Now()), true)
}

func writeMetaProperties(fsys vfs.FS, path string, m MetaProperties) error {
	return writeFile(fsys, path, m.Encode(time.Now()), true)
}

// NewUUID returns a random Kafka Uuid in its string form: 16 random bytes
// (a version 4 UUID) in URL-safe base64 without padding, 22 characters,
// never starting with '-' (Kafka's Uuid.randomUuid rule, so the id is not
// mistaken for a command-line flag). Used for cluster and directory ids.
func NewUUID() string {
	for {
		var b [16]byte
		rand.Read(b[:])
		b[6] = b[6]&0x0f | 0x40 // version 4
		b[8] = b[8]&0x3f | 0x80 // IETF variant
		s := base64.RawURLEncoding.EncodeToString(b[:])
		if s[0] != '-' {
			return s
		}
	}
}
