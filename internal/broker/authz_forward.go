package broker

import (
	"errors"

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
	kmsg.CreatePartitions:           gateCreatePartitions,
	kmsg.AlterConfigs:               gateAlterConfigs,
	kmsg.IncrementalAlterConfigs:    gateIncrementalAlterConfigs,
	kmsg.AlterPartitionAssignments:  gateCluster(opAlter),
	kmsg.ListPartitionReassignments: gateCluster(opDescribe),
	kmsg.CreateACLs:                 gateCluster(opAlter),
	kmsg.DeleteACLs:                 gateCluster(opAlter),
	kmsg.DescribeACLs:               gateCluster(opDescribe),
	kmsg.AlterClientQuotas:          gateCluster(opAlterConfigs),
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
	kmsg.WriteTxnMarkers:     gateCluster(opClusterAction),
	kmsg.DescribeQuorum:      gateCluster(opDescribe),
	kmsg.DescribeLogDirs:     gateCluster(opDescribe),
	kmsg.ElectLeaders:        gateCluster(opAlter),
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

// clusterDenied answers req with CLUSTER_AUTHORIZATION_FAILED.
func clusterDenied(req kmsg.Request) kmsg.Response {
	code := kerr.ClusterAuthorizationFailed.Code
	switch r := req.(type) {
	case *kmsg.ElectLeadersRequest:
		resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
		resp.ErrorCode = code
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
		return resp
	case *kmsg.AlterPartitionAssignmentsRequest:
		resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.ListPartitionReassignmentsRequest:
		resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.AlterClientQuotasRequest:
		resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
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
		return resp
	case *kmsg.DescribeClientQuotasRequest:
		resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
		resp.ErrorCode = code
		for _, u := range r.Users {
			ru := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			ru.User, ru.ErrorCode = u.Name, code
			resp.Results = append(resp.Results, ru)
		}
		return resp
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
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
		return resp
	case *kmsg.DescribeACLsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.BrokerRegistrationRequest:
		resp := r.ResponseKind().(*kmsg.BrokerRegistrationResponse)
		resp.ErrorCode, resp.BrokerEpoch = code, -1
		return resp
	case *kmsg.BrokerHeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.AlterPartitionRequest:
		resp := r.ResponseKind().(*kmsg.AlterPartitionResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.AllocateProducerIDsRequest:
		resp := r.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.DescribeQuorumRequest:
		resp := r.ResponseKind().(*kmsg.DescribeQuorumResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.DescribeLogDirsRequest:
		// v0-2 have no error code: an empty answer, as Kafka's.
		resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.WriteTxnMarkersRequest:
		resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
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
		return resp
	case *kmsg.CreateACLsRequest:
		resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
		for range r.Creations {
			rc := kmsg.NewCreateACLsResponseResult()
			rc.ErrorCode = code
			resp.Results = append(resp.Results, rc)
		}
		return resp
	case *kmsg.DeleteACLsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			rf := kmsg.NewDeleteACLsResponseResult()
			rf.ErrorCode = code
			resp.Results = append(resp.Results, rf)
		}
		return resp
	}
	return req.ResponseKind()
}

// gateCreateTopics: CREATE on the cluster or on the topic.
func gateCreateTopics(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	if b.authorizedCluster(c, opCreate) {
		return noGate(kreq)
	}
	return filterCreateTopics(kreq.(*kmsg.CreateTopicsRequest), func(t kmsg.CreateTopicsRequestTopic) int16 {
		if !b.authorized(c, opCreate, resTopic, t.Topic) {
			return kerr.TopicAuthorizationFailed.Code
		}
		return 0
	})
}

// filterCreateTopics takes out the topics check gives an error code and
// answers them with it; a name listed twice is decided once.
func filterCreateTopics(req *kmsg.CreateTopicsRequest, check func(kmsg.CreateTopicsRequestTopic) int16) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	out := *req
	var denied []kmsg.CreateTopicsResponseTopic
	out.Topics, denied = splitByName(req.Topics, func(t kmsg.CreateTopicsRequestTopic) string { return t.Topic }, check,
		func(name string, code int16) kmsg.CreateTopicsResponseTopic {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = name, code, codeMessage(code)
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			return rt
		})
	return withDenied(req, &out, denied, func(r kmsg.Response, d []kmsg.CreateTopicsResponseTopic) {
		resp := r.(*kmsg.CreateTopicsResponse)
		resp.Topics = append(resp.Topics, d...)
	})
}

// splitByName is split for entries named by name: the entries of a name
// are decided once, by its first, and a denied name gets one response
// entry.
func splitByName[T, R any](in []T, name func(T) string, code func(T) int16, deny func(string, int16) R) (kept []T, denied []R) {
	decided := map[string]int16{}
	for _, t := range in {
		n := name(t)
		c, seen := decided[n]
		if !seen {
			c = code(t)
			decided[n] = c
			if c != 0 {
				denied = append(denied, deny(n, c))
			}
		}
		if c == 0 {
			kept = append(kept, t)
		}
	}
	return kept, denied
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

// gateCreatePartitions: ALTER on each topic.
func gateCreatePartitions(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	return filterCreatePartitions(kreq.(*kmsg.CreatePartitionsRequest), func(t kmsg.CreatePartitionsRequestTopic) int16 {
		if !b.authorized(c, opAlter, resTopic, t.Topic) {
			return kerr.TopicAuthorizationFailed.Code
		}
		return 0
	})
}

// filterCreatePartitions takes out the topics check gives an error code
// and answers them with it; a name listed twice is decided once.
func filterCreatePartitions(req *kmsg.CreatePartitionsRequest, check func(kmsg.CreatePartitionsRequestTopic) int16) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	out := *req
	var denied []kmsg.CreatePartitionsResponseTopic
	out.Topics, denied = splitByName(req.Topics, func(t kmsg.CreatePartitionsRequestTopic) string { return t.Topic }, check,
		func(name string, code int16) kmsg.CreatePartitionsResponseTopic {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = name, code, codeMessage(code)
			return rt
		})
	return withDenied(req, &out, denied, func(r kmsg.Response, d []kmsg.CreatePartitionsResponseTopic) {
		resp := r.(*kmsg.CreatePartitionsResponse)
		resp.Topics = append(resp.Topics, d...)
	})
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

func gateAlterConfigs(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	out := *req
	var denied []kmsg.AlterConfigsResponseResource
	out.Resources, denied = split(req.Resources, func(r kmsg.AlterConfigsRequestResource) int16 {
		return b.configResourceDenied(c, opAlterConfigs, r.ResourceType, r.ResourceName)
	}, func(r kmsg.AlterConfigsRequestResource, code int16) kmsg.AlterConfigsResponseResource {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
		return rr
	})
	return withDenied(req, &out, denied, func(r kmsg.Response, d []kmsg.AlterConfigsResponseResource) {
		resp := r.(*kmsg.AlterConfigsResponse)
		resp.Resources = append(resp.Resources, d...)
	})
}

func gateIncrementalAlterConfigs(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	out := *req
	var denied []kmsg.IncrementalAlterConfigsResponseResource
	out.Resources, denied = split(req.Resources, func(r kmsg.IncrementalAlterConfigsRequestResource) int16 {
		return b.configResourceDenied(c, opAlterConfigs, r.ResourceType, r.ResourceName)
	}, func(r kmsg.IncrementalAlterConfigsRequestResource, code int16) kmsg.IncrementalAlterConfigsResponseResource {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
		return rr
	})
	return withDenied(req, &out, denied, func(r kmsg.Response, d []kmsg.IncrementalAlterConfigsResponseResource) {
		resp := r.(*kmsg.IncrementalAlterConfigsResponse)
		resp.Resources = append(resp.Resources, d...)
	})
}

// codeMessage is Kafka's message of an error code.
func codeMessage(code int16) *string {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return kmsg.StringPtr(ke.Message)
	}
	return nil
}
