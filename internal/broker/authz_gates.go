package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// The gates of the group, transaction and per-topic APIs, with the checks
// and codes of Kafka's KafkaApis (handleJoinGroupRequest,
// handleOffsetCommitRequest, handleTxnOffsetCommitRequest, …).
func init() {
	for _, k := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup} {
		gates[k] = gateGroupRead
	}
	gates[kmsg.OffsetCommit] = gateOffsetCommit
	gates[kmsg.OffsetFetch] = gateOffsetFetch
	gates[kmsg.FindCoordinator] = gateFindCoordinator
	gates[kmsg.ListGroups] = gateListGroups
	gates[kmsg.DescribeGroups] = gateDescribeGroups
	gates[kmsg.DeleteGroups] = gateDeleteGroups
	gates[kmsg.OffsetDelete] = gateOffsetDelete
	gates[kmsg.InitProducerID] = gateInitProducerID
	gates[kmsg.AddPartitionsToTxn] = gateAddPartitionsToTxn
	gates[kmsg.AddOffsetsToTxn] = gateAddOffsetsToTxn
	gates[kmsg.EndTxn] = gateEndTxn
	gates[kmsg.TxnOffsetCommit] = gateTxnOffsetCommit
	gates[kmsg.DescribeTransactions] = gateDescribeTransactions
	gates[kmsg.ListTransactions] = gateListTransactions
	gates[kmsg.OffsetForLeaderEpoch] = gateOffsetForLeaderEpoch
	// ListOffsets: DESCRIBE on each topic; DeleteRecords: DELETE;
	// DescribeProducers: READ; DescribeConfigs: DESCRIBE_CONFIGS on each
	// topic, group or (broker resources) the cluster (entryAuths).
	for _, k := range []kmsg.Key{kmsg.ListOffsets, kmsg.DeleteRecords, kmsg.DescribeProducers, kmsg.DescribeConfigs} {
		gates[k] = gateEntries
	}
}

// deny answers the whole request with resp.
func deny(resp kmsg.Response) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	return nil, func(kmsg.Response) kmsg.Response { return resp }
}

// topicDenier decides topics once each.
type topicDenier struct {
	b      *Broker
	c      *server.Conn
	op     kmsg.ACLOperation
	denied map[string]bool
	seen   map[string]bool
	any    bool
}

func (b *Broker) topicDenier(c *server.Conn, op kmsg.ACLOperation) *topicDenier {
	return &topicDenier{b: b, c: c, op: op, denied: map[string]bool{}, seen: map[string]bool{}}
}

// deny reports whether topic is denied.
func (d *topicDenier) deny(topic string) bool {
	if !d.seen[topic] {
		d.seen[topic] = true
		if !d.b.authorized(d.c, d.op, resTopic, topic) {
			d.denied[topic] = true
			d.any = true
		}
	}
	return d.denied[topic]
}

// split keeps the entries of in that code gives 0 and turns the others
// into response entries with deny.
func split[T, R any](in []T, code func(T) int16, deny func(T, int16) R) (kept []T, denied []R) {
	for _, t := range in {
		if c := code(t); c != 0 {
			denied = append(denied, deny(t, c))
		} else {
			kept = append(kept, t)
		}
	}
	return kept, denied
}

// withDenied is a gate's result once split: req itself when nothing was
// denied, else out (req with the kept entries) and a finish that adds the
// denied entries to the response with add.
func withDenied[R any](req, out kmsg.Request, denied []R, add func(kmsg.Response, []R)) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	if len(denied) == 0 {
		return noGate(req)
	}
	return out, func(r kmsg.Response) kmsg.Response {
		add(r, denied)
		return r
	}
}

// gateGroupRead: JoinGroup, SyncGroup, Heartbeat and LeaveGroup need READ
// on the group, else GROUP_AUTHORIZATION_FAILED.
func gateGroupRead(b *Broker, c *server.Conn, req kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	var group string
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		group = r.Group
	case *kmsg.SyncGroupRequest:
		group = r.Group
	case *kmsg.HeartbeatRequest:
		group = r.Group
	case *kmsg.LeaveGroupRequest:
		group = r.Group
	}
	if b.authorized(c, opRead, resGroup, group) {
		return noGate(req)
	}
	code := kerr.GroupAuthorizationFailed.Code
	resp := req.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode, r.Generation = code, -1
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	}
	return deny(resp)
}

// gateOffsetCommit: READ on the group (else every partition
// GROUP_AUTHORIZATION_FAILED) and on each topic (TOPIC_AUTHORIZATION_FAILED).
func gateOffsetCommit(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	var whole int16
	if !b.authorized(c, opRead, resGroup, req.Group) {
		whole = kerr.GroupAuthorizationFailed.Code
	}
	return filterEntries(req, b.entryCheck(c, req), whole)
}

// gateOffsetFetch: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) and
// on each named topic (its partitions TOPIC_AUTHORIZATION_FAILED); a
// fetch of every topic leaves out those not describable.
func gateOffsetFetch(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	d := b.topicDenier(c, opDescribe)
	code := kerr.GroupAuthorizationFailed.Code
	if req.Version < 8 {
		if !b.authorized(c, opDescribe, resGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = code
			return deny(resp)
		}
		out := *req
		if req.Topics != nil {
			out.Topics = []kmsg.OffsetFetchRequestTopic{}
		}
		var denied []kmsg.OffsetFetchResponseTopic
		for _, t := range req.Topics {
			if !d.deny(t.Topic) {
				out.Topics = append(out.Topics, t)
				continue
			}
			denied = append(denied, offsetFetchDenied(t.Topic, t.Partitions))
		}
		return &out, func(r kmsg.Response) kmsg.Response {
			resp := r.(*kmsg.OffsetFetchResponse)
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if req.Topics != nil || !d.deny(t.Topic) {
					kept = append(kept, t)
				}
			}
			resp.Topics = append(kept, denied...)
			return resp
		}
	}
	// v8+: groups batched, each with its own error.
	out := *req
	out.Groups = nil
	deniedGroups := map[string]bool{}
	deniedTopics := map[string][]kmsg.OffsetFetchResponseTopic{}
	for _, g := range req.Groups {
		if !b.authorized(c, opDescribe, resGroup, g.Group) {
			deniedGroups[g.Group] = true
			continue
		}
		og := g
		if g.Topics != nil {
			og.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		}
		for _, t := range g.Topics {
			if !d.deny(t.Topic) {
				og.Topics = append(og.Topics, t)
				continue
			}
			deniedTopics[g.Group] = append(deniedTopics[g.Group], offsetFetchDenied(t.Topic, t.Partitions))
		}
		out.Groups = append(out.Groups, og)
	}
	return &out, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.OffsetFetchResponse)
		for i := range resp.Groups {
			g := &resp.Groups[i]
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				if !d.deny(t.Topic) {
					kept = append(kept, t)
				}
			}
			g.Topics = kept
			for _, t := range deniedTopics[g.Group] {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p.Partition, -1, -1, p.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
				}
				g.Topics = append(g.Topics, rt)
			}
		}
		for _, g := range req.Groups {
			if deniedGroups[g.Group] {
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group, rg.ErrorCode = g.Group, code
				resp.Groups = append(resp.Groups, rg)
			}
		}
		return resp
	}
}

// offsetFetchDenied is the v0-v7 entry of a topic not describable.
func offsetFetchDenied(topic string, partitions []int32) kmsg.OffsetFetchResponseTopic {
	rt := kmsg.NewOffsetFetchResponseTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
		rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// gateFindCoordinator: DESCRIBE on the group (key type 0) or the
// transactional id (1), else GROUP_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
func gateFindCoordinator(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	check := func(key string) int16 {
		switch req.CoordinatorType {
		case 0:
			if !b.authorized(c, opDescribe, resGroup, key) {
				return kerr.GroupAuthorizationFailed.Code
			}
		case 1:
			if !b.authorized(c, opDescribe, resTxnID, key) {
				return kerr.TransactionalIDAuthorizationFailed.Code
			}
		}
		return 0
	}
	if req.Version < 4 {
		if code := check(req.CoordinatorKey); code != 0 {
			resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
			resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
			return deny(resp)
		}
		return noGate(req)
	}
	out := *req
	out.CoordinatorKeys = nil
	var denied []kmsg.FindCoordinatorResponseCoordinator
	for _, k := range req.CoordinatorKeys {
		if code := check(k); code != 0 {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key, rc.ErrorCode, rc.NodeID, rc.Port = k, code, -1, -1
			denied = append(denied, rc)
			continue
		}
		out.CoordinatorKeys = append(out.CoordinatorKeys, k)
	}
	if len(denied) == 0 {
		return noGate(req)
	}
	if len(out.CoordinatorKeys) == 0 {
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.Coordinators = denied
		return deny(resp)
	}
	return &out, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.FindCoordinatorResponse)
		resp.Coordinators = append(resp.Coordinators, denied...)
		return resp
	}
}

// gateListGroups: DESCRIBE on the cluster lists every group, otherwise
// only the groups the principal may describe.
func gateListGroups(b *Broker, c *server.Conn, req kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	if b.authorizedCluster(c, opDescribe) {
		return noGate(req)
	}
	return req, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.ListGroupsResponse)
		kept := resp.Groups[:0]
		for _, g := range resp.Groups {
			if b.authorized(c, opDescribe, resGroup, g.Group) {
				kept = append(kept, g)
			}
		}
		resp.Groups = kept
		return resp
	}
}

// gateDescribeGroups: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED),
// and the authorized operations (KIP-430) when asked.
func gateDescribeGroups(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	out := *req
	var finish func(kmsg.Response) kmsg.Response
	out.Groups, finish = gateGroupsDescribed(b, c, req.Groups, req.IncludeAuthorizedOperations,
		func(r kmsg.Response) *[]kmsg.DescribeGroupsResponseGroup {
			return &r.(*kmsg.DescribeGroupsResponse).Groups
		},
		func(g *kmsg.DescribeGroupsResponseGroup) (string, int16, *int32) {
			return g.Group, g.ErrorCode, &g.AuthorizedOperations
		},
		func(name string, code int16) kmsg.DescribeGroupsResponseGroup {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = name, code
			return g
		})
	return &out, finish
}

// gateGroupsDescribed is the gate of DescribeGroups, ConsumerGroupDescribe
// and ShareGroupDescribe, whose responses differ only in their types: it
// returns the groups c may DESCRIBE, and a finish that fills the
// authorized operations (KIP-430) of the groups answered without error
// when withOps, and appends an entry GROUP_AUTHORIZATION_FAILED (made by
// denied) for each other group. groups gives the response's entries, entry
// an entry's name, error code and authorized operations.
func gateGroupsDescribed[G any](b *Broker, c *server.Conn, names []string, withOps bool,
	groups func(kmsg.Response) *[]G, entry func(*G) (string, int16, *int32),
	denied func(name string, code int16) G) ([]string, func(kmsg.Response) kmsg.Response) {
	var kept, refused []string
	for _, g := range names {
		if b.authorized(c, opDescribe, resGroup, g) {
			kept = append(kept, g)
		} else {
			refused = append(refused, g)
		}
	}
	return kept, func(r kmsg.Response) kmsg.Response {
		gs := groups(r)
		if withOps {
			for i := range *gs {
				if name, code, ops := entry(&(*gs)[i]); code == 0 {
					*ops = b.authorizedOps(c, resGroup, name)
				}
			}
		}
		for _, g := range refused {
			*gs = append(*gs, denied(g, kerr.GroupAuthorizationFailed.Code))
		}
		return r
	}
}

// gateDeleteGroups: DELETE on each group.
func gateDeleteGroups(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	out := *req
	var denied []kmsg.DeleteGroupsResponseGroup
	out.Groups, denied = split(req.Groups, func(g string) int16 {
		if !b.authorized(c, opDelete, resGroup, g) {
			return kerr.GroupAuthorizationFailed.Code
		}
		return 0
	}, func(g string, code int16) kmsg.DeleteGroupsResponseGroup {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, code
		return rg
	})
	return withDenied(req, &out, denied, func(r kmsg.Response, d []kmsg.DeleteGroupsResponseGroup) {
		resp := r.(*kmsg.DeleteGroupsResponse)
		resp.Groups = append(resp.Groups, d...)
	})
}

// gateOffsetDelete: DELETE on the group (top-level
// GROUP_AUTHORIZATION_FAILED), READ on each topic.
func gateOffsetDelete(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	if !b.authorized(c, opDelete, resGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return deny(resp)
	}
	return gateEntries(b, c, req)
}

// gateInitProducerID: a transactional id needs WRITE on it
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
// IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679), else
// CLUSTER_AUTHORIZATION_FAILED.
func gateInitProducerID(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	var code int16
	if req.TransactionalID != nil {
		if !b.authorized(c, opWrite, resTxnID, *req.TransactionalID) {
			code = kerr.TransactionalIDAuthorizationFailed.Code
		}
	} else if !b.authorizedCluster(c, opIdempotentWrite) &&
		!b.authorizer().AuthorizeAny(connPrincipal(c), connHost(c), opWrite, resTopic) {
		code = kerr.ClusterAuthorizationFailed.Code
	}
	if code == 0 {
		return noGate(req)
	}
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return deny(resp)
}

// gateAddPartitionsToTxn: v0-v3 (clients) need WRITE on the transactional
// id (every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each
// topic (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED);
// v4+ (brokers, KIP-890) CLUSTER_ACTION on the cluster.
func gateAddPartitionsToTxn(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	if req.Version >= 4 {
		if b.authorizedCluster(c, opClusterAction) {
			return noGate(req)
		}
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return deny(resp)
	}
	txnOK := b.authorized(c, opWrite, resTxnID, req.TransactionalID)
	d := b.topicDenier(c, opWrite)
	if txnOK {
		for _, t := range req.Topics {
			d.deny(t.Topic)
		}
		if !d.any {
			return noGate(req)
		}
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range req.Topics {
		code := kerr.OperationNotAttempted.Code
		switch {
		case !txnOK:
			code = kerr.TransactionalIDAuthorizationFailed.Code
		case d.deny(t.Topic):
			code = kerr.TopicAuthorizationFailed.Code
		}
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return deny(resp)
}

// gateAddOffsetsToTxn: WRITE on the transactional id, READ on the group.
func gateAddOffsetsToTxn(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	var code int16
	switch {
	case !b.authorized(c, opWrite, resTxnID, req.TransactionalID):
		code = kerr.TransactionalIDAuthorizationFailed.Code
	case !b.authorized(c, opRead, resGroup, req.Group):
		code = kerr.GroupAuthorizationFailed.Code
	default:
		return noGate(req)
	}
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = code
	return deny(resp)
}

// gateEndTxn: WRITE on the transactional id.
func gateEndTxn(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.EndTxnRequest)
	if b.authorized(c, opWrite, resTxnID, req.TransactionalID) {
		return noGate(req)
	}
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	return deny(resp)
}

// gateTxnOffsetCommit: WRITE on the transactional id, READ on the group
// (each failing every partition), READ on each topic.
func gateTxnOffsetCommit(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	var whole int16
	switch {
	case !b.authorized(c, opWrite, resTxnID, req.TransactionalID):
		whole = kerr.TransactionalIDAuthorizationFailed.Code
	case !b.authorized(c, opRead, resGroup, req.Group):
		whole = kerr.GroupAuthorizationFailed.Code
	}
	return filterEntries(req, b.entryCheck(c, req), whole)
}

// gateDescribeTransactions: DESCRIBE on each transactional id.
func gateDescribeTransactions(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	out := *req
	var denied []kmsg.DescribeTransactionsResponseTransactionState
	out.TransactionalIDs, denied = split(req.TransactionalIDs, func(id string) int16 {
		if !b.authorized(c, opDescribe, resTxnID, id) {
			return kerr.TransactionalIDAuthorizationFailed.Code
		}
		return 0
	}, func(id string, code int16) kmsg.DescribeTransactionsResponseTransactionState {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ErrorCode, st.ProducerID, st.ProducerEpoch = id, code, -1, -1
		return st
	})
	return withDenied(req, &out, denied, func(r kmsg.Response, d []kmsg.DescribeTransactionsResponseTransactionState) {
		resp := r.(*kmsg.DescribeTransactionsResponse)
		resp.TransactionStates = append(resp.TransactionStates, d...)
	})
}

// gateListTransactions lists only the transactional ids the principal
// may describe.
func gateListTransactions(b *Broker, c *server.Conn, req kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	return req, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.ListTransactionsResponse)
		kept := resp.TransactionStates[:0]
		for _, s := range resp.TransactionStates {
			if b.authorized(c, opDescribe, resTxnID, s.TransactionalID) {
				kept = append(kept, s)
			}
		}
		resp.TransactionStates = kept
		return resp
	}
}

// gateOffsetForLeaderEpoch: a follower (replica id >= 0) needs
// CLUSTER_ACTION, else every partition is denied; a consumer DESCRIBE on
// each topic.
func gateOffsetForLeaderEpoch(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	if req.ReplicaID < 0 {
		return gateEntries(b, c, req)
	}
	all := !b.authorizedCluster(c, opClusterAction)
	return filterEntries(req, func(entry) int16 {
		if all {
			return kerr.TopicAuthorizationFailed.Code
		}
		return 0
	}, 0)
}
