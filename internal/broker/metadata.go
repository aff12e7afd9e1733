package broker

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/acl"
	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/server"
)

// Metadata: v0-12
//
// Version notes:
//   - v0: the lowest version served
//   - v1: Rack (response Broker), IsInternal (response Topic), ControllerID
//     (response)
//   - v2: ClusterID (response)
//   - v3: ThrottleMillis (response)
//   - v4: AllowAutoTopicCreation (request)
//   - v5: OfflineReplicas (response TopicPartition)
//   - v6: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v7: LeaderEpoch (response TopicPartition)
//   - v8: IncludeClusterAuthorizedOperations (request),
//     IncludeTopicAuthorizedOperations (request), AuthorizedOperations
//     (response Topic), AuthorizedOperations (response)
//   - v9: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v10: TopicID (request Topic), TopicID (response Topic)
//   - v11: drops IncludeClusterAuthorizedOperations (request), drops
//     AuthorizedOperations (response)
//   - v12: no field change

// Metadata v0-v12. Topics that do not exist are created when
// auto.create.topics.enable is set and the request allows it (v4+); as in
// Kafka, the response that creates them lists them with LEADER_NOT_AVAILABLE
// and no partitions, and clients ask again (kafka-go's tests count on it).
func init() { register(kmsg.Metadata, 0, 12, handleMetadata) }

func handleMetadata(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	im := b.image()

	// As Kafka's KafkaApis: a named topic needs DESCRIBE (else
	// TOPIC_AUTHORIZATION_FAILED, whether or not it exists), its
	// auto-creation CREATE on the cluster or the topic; a request for
	// every topic lists only those the principal may describe.
	var denied map[string]bool
	if b.authorizer().Enabled {
		denied = map[string]bool{}
		createAll := b.authorizedCluster(c, opCreate)
		for _, t := range req.Topics {
			if t.Topic == nil {
				continue
			}
			n := *t.Topic
			if !b.authorized(c, opDescribe, resTopic, n) ||
				im.Topic(n) == nil && b.node.AutoCreateTopicsEnable && (req.Version < 4 || req.AllowAutoTopicCreation) &&
					!createAll && !b.authorized(c, opCreate, resTopic, n) {
				denied[n] = true
			}
		}
	}

	// Auto-create first; the new topics are answered LEADER_NOT_AVAILABLE.
	var created map[string]bool
	var refused map[string]int16 // auto-creation refused for good: the topic's error
	if req.Topics != nil && b.node.AutoCreateTopicsEnable && (req.Version < 4 || req.AllowAutoTopicCreation) {
		var create []controller.CreateTopic
		for _, t := range req.Topics {
			if t.Topic != nil && !denied[*t.Topic] && im.Topic(*t.Topic) == nil && controller.ValidTopicName(*t.Topic) == nil {
				create = append(create, controller.CreateTopic{Name: *t.Topic, Partitions: -1, ReplicationFactor: -1})
			}
		}
		if len(create) > 0 {
			refused = b.autoCreate(ctx, create)
			im = b.image()
			created = make(map[string]bool, len(create))
			for _, c := range create {
				created[c.Name] = true
			}
		}
	}

	for _, br := range im.Brokers() {
		if br.Fenced {
			continue
		}
		if ep, ok := clientEndpoint(br, c.Listener); ok {
			mb := kmsg.NewMetadataResponseBroker()
			mb.NodeID, mb.Host, mb.Port, mb.Rack = br.ID, ep.Host, ep.Port, br.Rack
			resp.Brokers = append(resp.Brokers, mb)
		}
	}
	cid := im.ClusterID
	resp.ClusterID = &cid
	resp.ControllerID = b.controllerID()
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = b.authorizedOps(c, resCluster, acl.ClusterName)
	}

	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for _, name := range im.TopicNames() {
			if b.authorized(c, opDescribe, resTopic, name) {
				resp.Topics = append(resp.Topics, b.metadataTopic(c, im, name, im.Topic(name), req))
			}
		}
		return resp, nil
	}
	for _, rt := range req.Topics {
		var t *metadata.Topic
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
			t = im.Topic(name)
		} else if rt.TopicID != ([16]byte{}) {
			if t = im.TopicByID(rt.TopicID); t != nil {
				name = t.Name
			}
		}
		if denied[name] && rt.Topic != nil || rt.Topic == nil && t != nil && !b.authorized(c, opDescribe, resTopic, name) {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = rt.Topic, kerr.TopicAuthorizationFailed.Code
			mt.AuthorizedOperations = math.MinInt32
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		mt := b.metadataTopic(c, im, name, t, req)
		if t != nil && created[name] {
			mt.ErrorCode = kerr.LeaderNotAvailable.Code
			mt.Partitions = nil
		}
		if t == nil {
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if controller.ValidTopicName(name) != nil && rt.Topic != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			}
			if rt.Topic == nil {
				mt.ErrorCode = kerr.UnknownTopicID.Code
				mt.TopicID = rt.TopicID
			}
			if code, ok := refused[name]; ok && rt.Topic != nil {
				mt.ErrorCode = code
			}
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp, nil
}

func (b *Broker) metadataTopic(c *server.Conn, im *metadata.Image, name string, t *metadata.Topic, req *kmsg.MetadataRequest) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	n := name
	mt.Topic = &n
	if t == nil {
		return mt
	}
	mt.TopicID = t.ID
	mt.IsInternal = name == "__consumer_offsets" || name == "__transaction_state"
	if req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = b.authorizedOps(c, resTopic, name)
	}
	for i, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader = p.Leader
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = p.Replicas
		mp.ISR = p.ISR
		mp.OfflineReplicas = []int32{}
		if len(p.LostReplicas) > 0 {
			// Replicas their broker cannot host (KIP-858's
			// DirectoryId.LOST), as Kafka lists a replica on an
			// offline directory.
			mp.OfflineReplicas = p.LostReplicas
		}
		if p.Leader < 0 || im.Broker(p.Leader) == nil {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// clientEndpoint is the broker's endpoint of listener, the one a request
// came in on, as Kafka answers Metadata, FindCoordinator and
// DescribeCluster with the endpoints of the request's listener (a client
// on SASL_SSL is sent to SASL_SSL listeners). A broker without that
// listener gives its first registered endpoint, as before listeners were
// told apart.
func clientEndpoint(br *metadata.Broker, listener string) (metadata.Endpoint, bool) {
	for _, ep := range br.Endpoints {
		if ep.Name == listener {
			return ep, true
		}
	}
	if len(br.Endpoints) > 0 {
		return br.Endpoints[0], true
	}
	return metadata.Endpoint{}, false
}

// autoCreate creates topics for Metadata (auto.create.topics.enable). It
// returns the error codes of the topics the controller refused for a
// reason retrying cannot change (INVALID_PARTITIONS past
// log.partitions.max), which Metadata answers for them as Kafka's
// autoCreateTopics answers its creation errors. The refusals of one
// request are logged as one line (the count, the first topic and its
// error): a Metadata request may name thousands of topics.
func (b *Broker) autoCreate(ctx context.Context, topics []controller.CreateTopic) map[string]int16 {
	errs, err := b.createTopics(ctx, topics)
	if err != nil {
		b.logger.Warn("auto-creating topics failed", "err", err)
		return nil
	}
	var refused map[string]int16
	var first string
	var firstErr error
	for i, e := range errs {
		if e == nil || i >= len(topics) {
			continue
		}
		code := errCode(e)
		if code == kerr.InvalidPartitions.Code {
			if refused == nil {
				refused = map[string]int16{}
				first, firstErr = topics[i].Name, e
			}
			refused[topics[i].Name] = code
		}
	}
	if len(refused) > 0 {
		b.logger.Warn("auto-creating topics refused", "topics", len(refused), "first", first, "err", firstErr)
	}
	return refused
}

// createTopics creates topics on the active controller: directly when this
// node is it, otherwise with a CreateTopics request to it, which waits up
// to its timeout_ms, 2 s, until this node's image has the topics
// (forward). It returns one error per topic.
func (b *Broker) createTopics(ctx context.Context, topics []controller.CreateTopic) ([]error, error) {
	if b.ctrl.Active() {
		errs, err := b.ctrl.CreateTopics(ctx, topics, false)
		if !errors.Is(err, controller.ErrNotController) {
			return errs, err
		}
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(5) // flexible: the answer carries the commit offset (forwardcommit.go)
	req.TimeoutMillis = 2000
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Name, t.Partitions, t.ReplicationFactor
		for k, v := range t.Configs {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, kmsg.StringPtr(v)
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := b.forward(ctx, req)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(topics))
	for i, rt := range resp.(*kmsg.CreateTopicsResponse).Topics {
		if i < len(errs) && rt.ErrorCode != 0 {
			errs[i] = kerr.ErrorForCode(rt.ErrorCode)
			if rt.ErrorCode == kerr.TopicAlreadyExists.Code {
				errs[i] = fmt.Errorf("%w: %s", controller.ErrTopicExists, rt.Topic)
			}
		}
	}
	return errs, nil
}
