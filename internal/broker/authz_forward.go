package broker

import (
	"errors"
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// gate authorizes a request before its handler runs or before it is
// forwarded to the active controller (whose connection carries this
// broker's principal, not the client's): it returns the request with the
// denied entries taken out, and a finish that adds their errors to the
// response. A nil request means the whole request is denied and finish(nil)
// builds the response.
type gate func(b *Broker, c *server.Conn, req kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response)

// gates are the checks of the APIs whose handlers may run elsewhere
// (those forwarded to the active controller, KIP-590, with Kafka's
// ControllerApis checks) and of those that need one cluster permission
// for the whole request.
var gates = map[kmsg.Key]gate{
	kmsg.CreateTopics:               gateCreateTopics,
	kmsg.DeleteTopics:               gateDeleteTopics,
	kmsg.CreatePartitions:           gateEntries, // ALTER on each topic
	kmsg.AlterConfigs:               gateEntries, // ALTER_CONFIGS (entryAuths)
	kmsg.IncrementalAlterConfigs:    gateEntries,
	kmsg.AlterPartitionAssignments:  gateCluster(opAlter),
	kmsg.ListPartitionReassignments: gateCluster(opDescribe),
	kmsg.CreateACLs:                 gateCluster(opAlter),
	kmsg.DeleteACLs:                 gateCluster(opAlter),
	kmsg.DescribeACLs:               gateCluster(opDescribe),
	kmsg.AlterClientQuotas:          gateCluster(opAlterConfigs),
	kmsg.UpdateFeatures:             gateCluster(opAlter),
	kmsg.DescribeClientQuotas:       gateCluster(opDescribeConfigs),
	// KIP-554: KafkaApis checks DESCRIBE, ControllerApis ALTER, on the
	// cluster.
	kmsg.DescribeUserSCRAMCredentials: gateCluster(opDescribe),
	kmsg.AlterUserSCRAMCredentials:    gateCluster(opAlter),
	// The broker-to-controller APIs and the quorum's DescribeQuorum.
	kmsg.BrokerRegistration:  gateCluster(opClusterAction),
	kmsg.BrokerHeartbeat:     gateCluster(opClusterAction),
	kmsg.AlterPartition:      gateCluster(opClusterAction),
	kmsg.AllocateProducerIDs: gateCluster(opClusterAction),
	// KIP-858: ControllerApis.handleAssignReplicasToDirs.
	kmsg.AssignReplicasToDirs: gateCluster(opClusterAction),
	kmsg.WriteTxnMarkers:      gateCluster(opClusterAction),
	kmsg.DescribeQuorum:       gateCluster(opDescribe),
	kmsg.DescribeLogDirs:      gateCluster(opDescribe),
	kmsg.ElectLeaders:         gateCluster(opAlter),
}

// noGate passes a request unchanged.
func noGate(req kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	return req, func(r kmsg.Response) kmsg.Response { return r }
}

// gateCluster denies the whole request unless c may perform op on the
// cluster: CLUSTER_AUTHORIZATION_FAILED at the top level and, for APIs
// whose entries carry codes, in each entry.
func gateCluster(op kmsg.ACLOperation) gate {
	return func(b *Broker, c *server.Conn, req kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
		if b.authorizedCluster(c, op) {
			return noGate(req)
		}
		return nil, func(kmsg.Response) kmsg.Response { return clusterDenied(req) }
	}
}

// clusterDenied answers req with CLUSTER_AUTHORIZATION_FAILED: in the
// response's top-level ErrorCode when it has one, and in each entry of the
// APIs whose entries carry codes. A response version without the field
// (DescribeLogDirs v0-v2) is an empty answer, as Kafka's.
func clusterDenied(req kmsg.Request) kmsg.Response {
	code := kerr.ClusterAuthorizationFailed.Code
	resp := req.ResponseKind()
	if f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode"); f.IsValid() {
		f.SetInt(int64(code))
	}
	switch r := req.(type) {
	case *kmsg.ElectLeadersRequest:
		resp := resp.(*kmsg.ElectLeadersResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	case *kmsg.AlterClientQuotasRequest:
		resp := resp.(*kmsg.AlterClientQuotasResponse)
		for _, e := range r.Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			re.ErrorCode = code
			for _, c := range e.Entity {
				rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
				rc.Type, rc.Name = c.Type, c.Name
				re.Entity = append(re.Entity, rc)
			}
			resp.Entries = append(resp.Entries, re)
		}
	case *kmsg.UpdateFeaturesRequest:
		resp := resp.(*kmsg.UpdateFeaturesResponse)
		for _, u := range r.FeatureUpdates {
			rr := kmsg.NewUpdateFeaturesResponseResult()
			rr.Feature, rr.ErrorCode = u.Feature, code
			resp.Results = append(resp.Results, rr)
		}
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		resp := resp.(*kmsg.DescribeUserSCRAMCredentialsResponse)
		for _, u := range r.Users {
			ru := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			ru.User, ru.ErrorCode = u.Name, code
			resp.Results = append(resp.Results, ru)
		}
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp := resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
		users := map[string]bool{}
		add := func(user string) {
			if !users[user] {
				users[user] = true
				ru := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				ru.User, ru.ErrorCode = user, code
				resp.Results = append(resp.Results, ru)
			}
		}
		for _, d := range r.Deletions {
			add(d.Name)
		}
		for _, u := range r.Upsertions {
			add(u.Name)
		}
	case *kmsg.BrokerRegistrationRequest:
		resp.(*kmsg.BrokerRegistrationResponse).BrokerEpoch = -1
	case *kmsg.WriteTxnMarkersRequest:
		resp := resp.(*kmsg.WriteTxnMarkersResponse)
		for _, m := range r.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
	case *kmsg.CreateACLsRequest:
		resp := resp.(*kmsg.CreateACLsResponse)
		for range r.Creations {
			rc := kmsg.NewCreateACLsResponseResult()
			rc.ErrorCode = code
			resp.Results = append(resp.Results, rc)
		}
	case *kmsg.DeleteACLsRequest:
		resp := resp.(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			rf := kmsg.NewDeleteACLsResponseResult()
			rf.ErrorCode = code
			resp.Results = append(resp.Results, rf)
		}
	}
	return resp
}

// gateCreateTopics: CREATE on the cluster or on each topic.
func gateCreateTopics(b *Broker, c *server.Conn, req kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	if b.authorizedCluster(c, opCreate) {
		return noGate(req)
	}
	return gateEntries(b, c, req)
}

// gateDeleteTopics: DELETE on each topic (named, or by v6 id when the id
// is known).
func gateDeleteTopics(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	return filterDeleteTopics(b, kreq.(*kmsg.DeleteTopicsRequest), func(name string) int16 {
		if !b.authorized(c, opDelete, resTopic, name) {
			return kerr.TopicAuthorizationFailed.Code
		}
		return 0
	})
}

// filterDeleteTopics takes out the topics check gives an error code and
// answers them with it; topics named by an unknown id are left to the
// handler.
func filterDeleteTopics(b *Broker, req *kmsg.DeleteTopicsRequest, check func(name string) int16) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	im := b.image()
	out := *req
	out.TopicNames, out.Topics = nil, nil
	type denial struct {
		name *string
		id   [16]byte
		code int16
	}
	var denied []denial
	for _, n := range req.TopicNames {
		if code := check(n); code != 0 {
			denied = append(denied, denial{kmsg.StringPtr(n), [16]byte{}, code})
		} else {
			out.TopicNames = append(out.TopicNames, n)
		}
	}
	for _, t := range req.Topics {
		name := ""
		switch {
		case t.Topic != nil:
			name = *t.Topic
		case t.TopicID != [16]byte{}:
			if mt := im.TopicByID(t.TopicID); mt != nil {
				name = mt.Name
			}
		}
		if name != "" {
			if code := check(name); code != 0 {
				denied = append(denied, denial{t.Topic, t.TopicID, code})
				continue
			}
		}
		out.Topics = append(out.Topics, t)
	}
	if len(denied) == 0 {
		return noGate(req)
	}
	return &out, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.DeleteTopicsResponse)
		for _, d := range denied {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = d.name, d.id, d.code
			rt.ErrorMessage = codeMessage(d.code)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
}

// configResourceDenied is the error of a config resource c may not apply
// op to, 0 when it may: ALTER_CONFIGS or DESCRIBE_CONFIGS on the topic
// (TOPIC_AUTHORIZATION_FAILED), on the group for group resources
// (GROUP_AUTHORIZATION_FAILED) or on the cluster for broker and
// broker-logger resources (CLUSTER_AUTHORIZATION_FAILED), as Kafka's
// ConfigHelper and ControllerApis.
func (b *Broker) configResourceDenied(c *server.Conn, op kmsg.ACLOperation, typ kmsg.ConfigResourceType, name string) int16 {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !b.authorized(c, op, resTopic, name) {
			return kerr.TopicAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !b.authorizedCluster(c, op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !b.authorized(c, op, resGroup, name) {
			return kerr.GroupAuthorizationFailed.Code
		}
	}
	return 0
}

// codeMessage is Kafka's message of an error code.
func codeMessage(code int16) *string {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return kmsg.StringPtr(ke.Message)
	}
	return nil
}
