package samsa_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsahq/samsa"
)

// TestForwardedWritesReadBack: on a 3-node cluster, every admin write sent
// to a broker that is not the active controller (forwarded, KIP-590) is
// in force on that broker once answered: a DescribeConfigs, DescribeAcls,
// FindCoordinator (authorized by the ACLs), DescribeClientQuotas,
// DescribeUserScramCredentials or Metadata sent right after the answer to
// the same broker shows the write, every time. Each write is sent by a
// client of the newest versions (flexible requests) and by one of Kafka
// 2.3's (IncrementalAlterConfigs v0, AlterConfigs v1, CreateAcls v1,
// CreateTopics v3, AlterClientQuotas v0: not flexible). The forwarding
// broker waited only for its own image of the moment, which often did not
// hold the controller's commit yet: the read showed the old value (2 to 16
// times of 30 for each check). The same with 3 controllers and 3 brokers,
// which follow the metadata quorum as observers.
func TestForwardedWritesReadBack(t *testing.T) {
	props := aclProps(map[string]string{"allow.everyone.if.no.acl.found": "true"})
	t.Run("combined", func(t *testing.T) {
		forwardedWritesReadBack(t, startCluster(t, 3, props))
	})
	t.Run("separate roles", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Controllers: 3, Brokers: 3, Dir: t.TempDir(), Properties: props})
		if err != nil {
			t.Fatalf("start cluster: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		forwardedWritesReadBack(t, c)
	})
}

func forwardedWritesReadBack(t *testing.T, c *samsa.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	newest, adm := clusterClients(t, c)
	old23 := kversion.V2_3_0()
	old23.SetMaxKeyVersion(int16(kmsg.AlterClientQuotas), 0)
	old23.SetMaxKeyVersion(int16(kmsg.DescribeClientQuotas), 0)
	old, _ := clusterClients(t, c, kgo.MaxVersions(old23))
	for _, name := range []string{"rw-incremental", "rw-replace"} {
		if _, err := adm.CreateTopic(ctx, 1, 3, nil, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	var ctrl int32
	waitFor(t, time.Minute, "an active controller", func() bool { ctrl = c.ActiveController(); return ctrl >= 0 })
	var via int32 // a broker that is not the active controller
	for _, id := range c.Brokers() {
		if id != ctrl {
			via = id
			break
		}
	}
	// ANONYMOUS may do everything; a DENY on one group takes that away.
	for _, res := range []struct {
		typ  kmsg.ACLResourceType
		name string
	}{{kmsg.ACLResourceTypeCluster, "kafka-cluster"}, {kmsg.ACLResourceTypeTopic, "*"}, {kmsg.ACLResourceTypeGroup, "*"}} {
		createACL(t, ctx, newest, via, res.typ, res.name, kmsg.ACLPermissionTypeAllow, kmsg.ACLOperationAll)
	}

	const rounds = 30
	stale := map[string]int{}
	check := func(what string, ok bool, got string) {
		t.Helper()
		if !ok {
			if stale[what] == 0 {
				t.Logf("%s: read back %s", what, got)
			}
			stale[what]++
		}
	}
	type client struct {
		name string
		cl   *kgo.Client
	}
	for i := range rounds {
		// Alternate which client goes first: the writes right after a
		// topic deletion were seen in force more often.
		clients := []client{{"newest", newest}, {"2.3", old}}
		if i%2 == 1 {
			clients[0], clients[1] = clients[1], clients[0]
		}
		for _, cl := range clients {
			br := cl.cl.Broker(int(via))
			tag := fmt.Sprintf("%s-%d", cl.name, i)
			value := strconv.Itoa(1_000_000 + i)

			// A topic config, incrementally.
			incrementalAlter(t, ctx, br, kmsg.ConfigResourceTypeTopic, "rw-incremental", "retention.ms", value)
			got := describeConfig(t, ctx, br, kmsg.ConfigResourceTypeTopic, "rw-incremental", "retention.ms")
			check(cl.name+" IncrementalAlterConfigs topic", got == value, got)

			// A topic's configs, replaced.
			aresp, err := alterConfigs(ctx, br, kmsg.ConfigResourceTypeTopic, "rw-replace", "segment.ms", value)
			if err != nil || aresp.Resources[0].ErrorCode != 0 {
				t.Fatalf("%s AlterConfigs: %v %+v", tag, err, aresp)
			}
			got = describeConfig(t, ctx, br, kmsg.ConfigResourceTypeTopic, "rw-replace", "segment.ms")
			check(cl.name+" AlterConfigs topic", got == value, got)

			// A dynamic config of the broker itself.
			incrementalAlter(t, ctx, br, kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(via)), "log.cleaner.backoff.ms", value)
			got = describeConfig(t, ctx, br, kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(via)), "log.cleaner.backoff.ms")
			check(cl.name+" IncrementalAlterConfigs broker", got == value, got)

			// An ACL denying a group: DescribeAcls lists it and the
			// authorizer applies it at once; deleted, it no longer does.
			group := "rw-group-" + tag
			createACL(t, ctx, cl.cl, via, kmsg.ACLResourceTypeGroup, group, kmsg.ACLPermissionTypeDeny, kmsg.ACLOperationDescribe)
			n := describeGroupACLs(t, ctx, br, group)
			check(cl.name+" CreateAcls then DescribeAcls", n == 1, strconv.Itoa(n)+" bindings")
			code := findCoordinatorCode(t, ctx, br, group)
			check(cl.name+" CreateAcls then FindCoordinator", code == kerr.GroupAuthorizationFailed.Code, fmt.Sprint(kerr.ErrorForCode(code)))
			da := kmsg.NewPtrDeleteACLsRequest()
			df := kmsg.NewDeleteACLsRequestFilter()
			df.ResourceType, df.ResourceName, df.ResourcePatternType = kmsg.ACLResourceTypeGroup, kmsg.StringPtr(group), kmsg.ACLResourcePatternTypeLiteral
			df.Operation, df.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			da.Filters = append(da.Filters, df)
			dresp, err := da.RequestWith(ctx, br)
			if err != nil || dresp.Results[0].ErrorCode != 0 || len(dresp.Results[0].MatchingACLs) != 1 {
				t.Fatalf("%s DeleteAcls: %v %+v", tag, err, dresp)
			}
			code = findCoordinatorCode(t, ctx, br, group)
			check(cl.name+" DeleteAcls then FindCoordinator", code != kerr.GroupAuthorizationFailed.Code, fmt.Sprint(kerr.ErrorForCode(code)))

			// A client quota.
			rate := float64(1_000_000 + i)
			qa := kmsg.NewPtrAlterClientQuotasRequest()
			qe := kmsg.NewAlterClientQuotasRequestEntry()
			qc := kmsg.NewAlterClientQuotasRequestEntryEntity()
			qc.Type, qc.Name = "client-id", kmsg.StringPtr("rw-"+cl.name)
			qe.Entity = append(qe.Entity, qc)
			qo := kmsg.NewAlterClientQuotasRequestEntryOp()
			qo.Key, qo.Value = "producer_byte_rate", rate
			qe.Ops = append(qe.Ops, qo)
			qa.Entries = append(qa.Entries, qe)
			qresp, err := qa.RequestWith(ctx, br)
			if err != nil || qresp.Entries[0].ErrorCode != 0 {
				t.Fatalf("%s AlterClientQuotas: %v %+v", tag, err, qresp)
			}
			q := describeQuota(t, ctx, br, "rw-"+cl.name, "producer_byte_rate")
			check(cl.name+" AlterClientQuotas", q == rate, fmt.Sprint(q))

			// A topic created, then deleted.
			topic := "rw-topic-" + tag
			ct := kmsg.NewPtrCreateTopicsRequest()
			ct.TimeoutMillis = 30_000
			ctt := kmsg.NewCreateTopicsRequestTopic()
			ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = topic, 1, 3
			ct.Topics = append(ct.Topics, ctt)
			cresp, err := ct.RequestWith(ctx, br)
			if err != nil || cresp.Topics[0].ErrorCode != 0 {
				t.Fatalf("%s CreateTopics: %v %+v", tag, err, cresp)
			}
			code, parts := topicMetadata(t, ctx, br, topic)
			check(cl.name+" CreateTopics then Metadata", code == 0 && parts == 1, fmt.Sprintf("%v, %d partitions", kerr.ErrorForCode(code), parts))
			dt := kmsg.NewPtrDeleteTopicsRequest()
			dt.TimeoutMillis = 30_000
			dtt := kmsg.NewDeleteTopicsRequestTopic()
			dtt.Topic = kmsg.StringPtr(topic)
			dt.Topics, dt.TopicNames = append(dt.Topics, dtt), []string{topic}
			dtresp, err := dt.RequestWith(ctx, br)
			if err != nil || dtresp.Topics[0].ErrorCode != 0 {
				t.Fatalf("%s DeleteTopics: %v %+v", tag, err, dtresp)
			}
			code, parts = topicMetadata(t, ctx, br, topic)
			check(cl.name+" DeleteTopics then Metadata", code == kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("%v, %d partitions", kerr.ErrorForCode(code), parts))
		}

		// SCRAM credentials (AlterUserScramCredentials is flexible in
		// every version).
		user := "rw-user-" + strconv.Itoa(i)
		sa := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		su := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		su.Name, su.Mechanism, su.Iterations = user, 1, 4096
		su.Salt, su.SaltedPassword = []byte("salt-"+user), make([]byte, 32)
		sa.Upsertions = append(sa.Upsertions, su)
		br := newest.Broker(int(via))
		sresp, err := sa.RequestWith(ctx, br)
		if err != nil || sresp.Results[0].ErrorCode != 0 {
			t.Fatalf("AlterUserScramCredentials: %v %+v", err, sresp)
		}
		sd := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		sdu := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		sdu.Name = user
		sd.Users = append(sd.Users, sdu)
		sdresp, err := sd.RequestWith(ctx, br)
		if err != nil || len(sdresp.Results) != 1 {
			t.Fatalf("DescribeUserScramCredentials: %v %+v", err, sdresp)
		}
		code := sdresp.Results[0].ErrorCode
		check("AlterUserScramCredentials", code == 0, fmt.Sprint(kerr.ErrorForCode(code)))
	}
	if now := c.ActiveController(); now != ctrl {
		t.Logf("the active controller moved from %d to %d during the test", ctrl, now)
	}
	for what, n := range stale {
		t.Errorf("%s through broker %d (the active controller: %d): the write was not in force %d times of %d", what, via, ctrl, n, rounds)
	}
}

// createACL creates one binding for ANONYMOUS through broker via.
func createACL(t *testing.T, ctx context.Context, cl *kgo.Client, via int32, typ kmsg.ACLResourceType, name string, perm kmsg.ACLPermissionType, op kmsg.ACLOperation) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = typ, name, kmsg.ACLResourcePatternTypeLiteral
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = anon, "*", op, perm
	req.Creations = append(req.Creations, cr)
	resp, err := req.RequestWith(ctx, cl.Broker(int(via)))
	if err != nil || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("CreateAcls %s %s: %v %+v", typ, name, err, resp)
	}
}

// describeConfig is the value of config name of a resource, as broker br
// describes it ("<null>" when null, "<missing>" when not listed).
func describeConfig(t *testing.T, ctx context.Context, br *kgo.Broker, typ kmsg.ConfigResourceType, resource, name string) string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = typ, resource, []string{name}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, br)
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("DescribeConfigs %s: %v %+v", resource, err, resp)
	}
	for _, c := range resp.Resources[0].Configs {
		if c.Name == name {
			return orNull(c.Value)
		}
	}
	return "<missing>"
}

// describeGroupACLs counts the bindings of the literal group resource
// broker br lists.
func describeGroupACLs(t *testing.T, ctx context.Context, br *kgo.Broker, group string) int {
	t.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = kmsg.ACLResourceTypeGroup, kmsg.StringPtr(group), kmsg.ACLResourcePatternTypeLiteral
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, br)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("DescribeAcls %s: %v %+v", group, err, resp)
	}
	n := 0
	for _, r := range resp.Resources {
		n += len(r.ACLs)
	}
	return n
}

// findCoordinatorCode is broker br's error code for the group's
// coordinator (GROUP_AUTHORIZATION_FAILED without DESCRIBE on it).
func findCoordinatorCode(t *testing.T, ctx context.Context, br *kgo.Broker, group string) int16 {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
	resp, err := req.RequestWith(ctx, br)
	if err != nil {
		t.Fatalf("FindCoordinator %s: %v", group, err)
	}
	if resp.Version >= 4 {
		if len(resp.Coordinators) != 1 {
			t.Fatalf("FindCoordinator %s: %+v", group, resp)
		}
		return resp.Coordinators[0].ErrorCode
	}
	return resp.ErrorCode
}

// describeQuota is the value of quota key of a client id as broker br
// describes it, -1 when it has none.
func describeQuota(t *testing.T, ctx context.Context, br *kgo.Broker, clientID, key string) float64 {
	t.Helper()
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	comp := kmsg.NewDescribeClientQuotasRequestComponent()
	comp.EntityType, comp.MatchType, comp.Match = "client-id", kmsg.QuotasMatchTypeExact, kmsg.StringPtr(clientID)
	req.Components, req.Strict = append(req.Components, comp), true
	resp, err := req.RequestWith(ctx, br)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("DescribeClientQuotas %s: %v %+v", clientID, err, resp)
	}
	for _, e := range resp.Entries {
		for _, v := range e.Values {
			if v.Key == key {
				return v.Value
			}
		}
	}
	return -1
}

// topicMetadata is broker br's Metadata error code for topic and its
// number of partitions.
func topicMetadata(t *testing.T, ctx context.Context, br *kgo.Broker, topic string) (int16, int) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics, req.AllowAutoTopicCreation = append(req.Topics, rt), false
	resp, err := req.RequestWith(ctx, br)
	if err != nil || len(resp.Topics) != 1 {
		t.Fatalf("Metadata %s: %v %+v", topic, err, resp)
	}
	return resp.Topics[0].ErrorCode, len(resp.Topics[0].Partitions)
}

// BenchmarkForwardedWrite: an IncrementalAlterConfigs of a topic config
// on a 3-node cluster, sent to the active controller's node (the
// baseline: no forwarding), forwarded by another broker (flexible v1: the
// commit offset comes in the answer) and forwarded at v0 (not flexible:
// one more round trip, DescribeQuorum). Compare ns/op across the three.
func BenchmarkForwardedWrite(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Nodes: 3, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		b.Fatal(err)
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "bench", 1, 3
	ct.Topics = append(ct.Topics, ctt)
	if resp, err := ct.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		b.Fatalf("create: %v %+v", err, resp)
	}
	v0 := kversion.Stable()
	v0.SetMaxKeyVersion(int16(kmsg.IncrementalAlterConfigs), 0)
	old, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.MaxVersions(v0))
	if err != nil {
		b.Fatal(err)
	}
	defer old.Close()
	ctrl := c.ActiveController()
	for _, bc := range []struct {
		name string
		cl   *kgo.Client
		via  int32
	}{{"controller", cl, ctrl}, {"forwarded", cl, ctrl%3 + 1}, {"forwarded-v0", old, ctrl%3 + 1}} {
		b.Run(bc.name, func(b *testing.B) {
			br := bc.cl.Broker(int(bc.via))
			for i := 0; b.Loop(); i++ {
				incrementalAlter(b, ctx, br, kmsg.ConfigResourceTypeTopic, "bench", "retention.ms", strconv.Itoa(1_000_000+i))
			}
		})
	}
	if now := c.ActiveController(); now != ctrl {
		b.Logf("the active controller moved from %d to %d", ctrl, now)
	}
}

// incrementalAlter sets config name of a resource to value through
// broker br with IncrementalAlterConfigs (the version br's client
// negotiates) and fails tb unless it succeeded.
func incrementalAlter(tb testing.TB, ctx context.Context, br *kgo.Broker, typ kmsg.ConfigResourceType, resource, name, value string) {
	tb.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, resource
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = name, kmsg.StringPtr(value)
	r.Configs = append(r.Configs, rc)
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, br)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		tb.Fatalf("IncrementalAlterConfigs %s %s=%s: %v %+v", resource, name, value, err, resp)
	}
}

// alterConfigs replaces the configs of a resource by name=value through
// broker br with AlterConfigs (the version br's client negotiates).
func alterConfigs(ctx context.Context, br *kgo.Broker, typ kmsg.ConfigResourceType, resource, name, value string) (*kmsg.AlterConfigsResponse, error) {
	req := kmsg.NewPtrAlterConfigsRequest()
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, resource
	rc := kmsg.NewAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = name, kmsg.StringPtr(value)
	r.Configs = append(r.Configs, rc)
	req.Resources = append(req.Resources, r)
	return req.RequestWith(ctx, br)
}

// TestForwardedWriteAfterLeaderChange: after the active controller
// stopped cleanly, forwarded writes of versions without tagged fields
// that write nothing (validate_only, an invalid config) are answered at
// once by a broker that is not the new active controller. The broker
// waited until its image reached the quorum's high-watermark less one,
// which named the new leader's LEADER_CHANGE control batch, counted by no
// image: each such write waited for its timeout_ms (CreateTopics) or 30 s
// (AlterConfigs).
func TestForwardedWriteAfterLeaderChange(t *testing.T) {
	c := startCluster(t, 3, nil)
	var ctrl int32
	waitFor(t, time.Minute, "an active controller", func() bool { ctrl = c.ActiveController(); return ctrl >= 0 })
	_, adm := clusterClients(t, c)
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, "configured"); err != nil {
		t.Fatal(err)
	}
	if err := c.StopNode(ctrl); err != nil {
		t.Fatal(err)
	}
	var next int32
	waitFor(t, time.Minute, "another active controller", func() bool { next = c.ActiveController(); return next >= 0 && next != ctrl })
	var via int32 = -1
	for _, id := range c.Brokers() {
		if id != ctrl && id != next {
			via = id
		}
	}
	old, _ := clusterClients(t, c, kgo.MaxVersions(kversion.V2_3_0())) // CreateTopics v3, AlterConfigs v1
	br := old.Broker(int(via))
	// Far less than the waits before (60 s, 30 s); the answers take
	// milliseconds.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis, ct.ValidateOnly = 60_000, true
	tt := kmsg.NewCreateTopicsRequestTopic()
	tt.Topic, tt.NumPartitions, tt.ReplicationFactor = "validated", 1, 1
	ct.Topics = append(ct.Topics, tt)
	cresp, err := ct.RequestWith(ctx, br)
	if err != nil {
		t.Fatalf("CreateTopics v%d validate_only via broker %d: %v", ct.Version, via, err)
	}
	if code := cresp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("CreateTopics validate_only: %v", kerr.ErrorForCode(code))
	}

	aresp, err := alterConfigs(ctx, br, kmsg.ConfigResourceTypeTopic, "configured", "retention.ms", "bogus")
	if err != nil {
		t.Fatalf("AlterConfigs (v1 at most) of an invalid value via broker %d: %v", via, err)
	}
	if code := aresp.Resources[0].ErrorCode; code != kerr.InvalidConfig.Code {
		t.Fatalf("AlterConfigs of an invalid value: %v, want INVALID_CONFIG", kerr.ErrorForCode(code))
	}
}
