package metadata

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/samsahq/samsa/internal/acl"
	"github.com/samsahq/samsa/internal/quota"
)

// UUID is a Kafka UUID (topic id, directory id), as kmsg carries it.
type UUID = [16]byte

// Record is one metadata record; its Type names it on disk.
type Record interface {
	Type() string
}

// TopicRecord creates a topic (Kafka's TopicRecord).
type TopicRecord struct {
	Name string `json:"name"`
	ID   UUID   `json:"id"`
}

// PartitionRecord creates a partition or replaces its state (Kafka's
// PartitionRecord and PartitionChangeRecord).
type PartitionRecord struct {
	TopicID        UUID    `json:"topic_id"`
	Partition      int32   `json:"partition"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	// AddingReplicas and RemovingReplicas describe a reassignment in
	// progress (KIP-455): Replicas holds both the target and the
	// replicas being removed.
	AddingReplicas   []int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas []int32 `json:"removing_replicas,omitempty"`
	// LostReplicas are the replicas whose broker reported that it cannot
	// host the partition (its log failed to load or be created): KIP-858's
	// AssignReplicasToDirs to DirectoryId.LOST, which Kafka keeps as the
	// replica's entry of PartitionChangeRecord.Directories. Samsa keeps
	// no directory per replica, only this sparse list (empty for almost
	// every partition). A lost replica neither leads nor joins the ISR
	// until its broker assigns it to an online directory again. Written
	// only when non-empty, so older nodes read the record as before.
	LostReplicas []int32 `json:"lost_replicas,omitempty"`
}

// RemoveTopicRecord deletes a topic and its partitions.
type RemoveTopicRecord struct {
	ID UUID `json:"id"`
}

// Config resource types, as DescribeConfigs numbers them.
const (
	ResourceTopic  int8 = 2
	ResourceBroker int8 = 4
	ResourceGroup  int8 = 32 // group configs (KIP-848, KIP-932)
)

// ConfigRecord sets (Value non-nil) or removes (nil) one config of a
// resource (Kafka's ConfigRecord).
type ConfigRecord struct {
	ResourceType int8    `json:"resource_type"`
	ResourceName string  `json:"resource_name"`
	Name         string  `json:"name"`
	Value        *string `json:"value"`
}

// Endpoint is an advertised listener of a broker.
type Endpoint struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// RegisterBrokerRecord registers a broker and its endpoints.
type RegisterBrokerRecord struct {
	BrokerID      int32      `json:"broker_id"`
	Epoch         int64      `json:"epoch"`
	IncarnationID UUID       `json:"incarnation_id"`
	Endpoints     []Endpoint `json:"endpoints"`
	Rack          *string    `json:"rack,omitempty"`
	Fenced        bool       `json:"fenced"`
}

// ProducerIDsRecord reserves producer ids [previous NextProducerID,
// NextProducerID) for BrokerID (Kafka's ProducerIdsRecord, KIP-730).
type ProducerIDsRecord struct {
	BrokerID       int32 `json:"broker_id"`
	BrokerEpoch    int64 `json:"broker_epoch"`
	NextProducerID int64 `json:"next_producer_id"`
}

// UserScramCredentialRecord sets a user's SCRAM credential for one
// mechanism (Kafka's UserScramCredentialRecord, KIP-554): the salt, the
// stored and server keys of RFC 5802 and the iteration count, never the
// password. Mechanism is 1 for SCRAM-SHA-256, 2 for SCRAM-SHA-512.
type UserScramCredentialRecord struct {
	Name       string `json:"name"`
	Mechanism  int8   `json:"mechanism"`
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
	Iterations int32  `json:"iterations"`
}

// RemoveUserScramCredentialRecord deletes a user's credential for one
// mechanism (Kafka's RemoveUserScramCredentialRecord).
type RemoveUserScramCredentialRecord struct {
	Name      string `json:"name"`
	Mechanism int8   `json:"mechanism"`
}

// BootstrapRecord marks that the bootstrap records of `samsa storage
// format` (--add-scram) were written to the log, so that they are written
// once per cluster, by the first active controller (Kafka writes them from
// bootstrap.checkpoint the same way).
type BootstrapRecord struct{}

// FeatureLevelRecord finalizes the level of a feature for the whole
// cluster (Kafka's FeatureLevelRecord, KIP-584): clients read it in
// ApiVersions v3+ FinalizedFeatures and choose their protocol by it. Level
// 0 removes the feature (Kafka does not finalize level 0 either). The one
// feature Samsa knows is transaction.version (see FeatureTransactionVersion).
type FeatureLevelRecord struct {
	Name         string `json:"name"`
	FeatureLevel int16  `json:"feature_level"`
}

// AccessControlEntryRecord adds an ACL binding (Kafka's
// AccessControlEntryRecord); ID names it for removal.
type AccessControlEntryRecord struct {
	ID UUID `json:"id"`
	acl.Binding
}

// RemoveAccessControlEntryRecord removes the ACL binding ID (Kafka's
// RemoveAccessControlEntryRecord).
type RemoveAccessControlEntryRecord struct {
	ID UUID `json:"id"`
}

// ClientQuotaRecord sets (Remove false) or removes one quota of a client
// quota entity (Kafka's ClientQuotaRecord, KIP-546).
type ClientQuotaRecord struct {
	Entity quota.Entity `json:"entity"`
	Key    string       `json:"key"`
	Value  float64      `json:"value,omitempty"`
	Remove bool         `json:"remove,omitempty"`
}

// Type implementations.
func (TopicRecord) Type() string                     { return "topic" }
func (PartitionRecord) Type() string                 { return "partition" }
func (RemoveTopicRecord) Type() string               { return "remove_topic" }
func (ConfigRecord) Type() string                    { return "config" }
func (RegisterBrokerRecord) Type() string            { return "register_broker" }
func (ProducerIDsRecord) Type() string               { return "producer_ids" }
func (AccessControlEntryRecord) Type() string        { return "acl" }
func (RemoveAccessControlEntryRecord) Type() string  { return "remove_acl" }
func (ClientQuotaRecord) Type() string               { return "client_quota" }
func (BootstrapRecord) Type() string                 { return "bootstrap" }
func (FeatureLevelRecord) Type() string              { return "feature_level" }
func (UserScramCredentialRecord) Type() string       { return "user_scram_credential" }
func (RemoveUserScramCredentialRecord) Type() string { return "remove_user_scram_credential" }

// ErrUnknownRecord is returned by Decode for a type it does not know.
var ErrUnknownRecord = errors.New("metadata: unknown record type")

// Encode returns the key and value of r as stored in the metadata log.
func Encode(r Record) (key, value []byte, err error) {
	value, err = json.Marshal(r)
	return []byte(r.Type()), value, err
}

// Decode parses a record from its key and value. A partition record in
// the layout Encode writes is read by a decoder of its own
// (decodePartitionFast), anything else by encoding/json.
func Decode(key, value []byte) (Record, error) {
	var r Record
	switch string(key) {
	case "topic":
		r = new(TopicRecord)
	case "partition":
		if p, ok := decodePartitionFast(value); ok {
			return p, nil
		}
		r = new(PartitionRecord)
	case "remove_topic":
		r = new(RemoveTopicRecord)
	case "config":
		r = new(ConfigRecord)
	case "register_broker":
		r = new(RegisterBrokerRecord)
	case "producer_ids":
		r = new(ProducerIDsRecord)
	case "bootstrap":
		r = new(BootstrapRecord)
	case "feature_level":
		r = new(FeatureLevelRecord)
	case "user_scram_credential":
		r = new(UserScramCredentialRecord)
	case "remove_user_scram_credential":
		r = new(RemoveUserScramCredentialRecord)
	case "acl":
		r = new(AccessControlEntryRecord)
	case "remove_acl":
		r = new(RemoveAccessControlEntryRecord)
	case "client_quota":
		r = new(ClientQuotaRecord)
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownRecord, key)
	}
	if err := json.Unmarshal(value, r); err != nil {
		return nil, fmt.Errorf("metadata: %s record: %w", key, err)
	}
	return deref(r), nil
}

func deref(r Record) Record {
	switch v := r.(type) {
	case *TopicRecord:
		return *v
	case *PartitionRecord:
		return *v
	case *RemoveTopicRecord:
		return *v
	case *ConfigRecord:
		return *v
	case *RegisterBrokerRecord:
		return *v
	case *ProducerIDsRecord:
		return *v
	case *BootstrapRecord:
		return *v
	case *FeatureLevelRecord:
		return *v
	case *UserScramCredentialRecord:
		return *v
	case *RemoveUserScramCredentialRecord:
		return *v
	case *AccessControlEntryRecord:
		return *v
	case *RemoveAccessControlEntryRecord:
		return *v
	case *ClientQuotaRecord:
		return *v
	}
	return r
}
