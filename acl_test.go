package samsa_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/record"
)

// Authorization (issue 15): ACLs for User:ANONYMOUS over PLAINTEXT, with
// real franz-go clients; each denial asserts Kafka's code and that nothing
// changed.

const anon = "User:ANONYMOUS"

// aclProps enables the StandardAuthorizer.
func aclProps(extra map[string]string) map[string]string {
	p := map[string]string{"authorizer.class.name": config.StandardAuthorizerClass, "group.initial.rebalance.delay.ms": "0"}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func mustCreateACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateACLs %+v: %v", r, r.Err)
		}
	}
}

// produceCode produces one record to topic and returns its error code.
func produceCode(t *testing.T, cl *kgo.Client, topic string) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = oneBatch(t)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// oneBatch is a v2 record batch of one record.
func oneBatch(t *testing.T) []byte {
	t.Helper()
	spec := record.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b, err := record.Build(spec, []record.Record{{Key: []byte("k"), Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func code(c int16) string {
	if c == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(c).Error()
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: %s, want %s", what, code(got), code(w))
	}
}

// direct is the node's broker, to send coordinator requests to without
// the client's FindCoordinator.
func direct(t *testing.T, cl *kgo.Client) *kgo.Broker {
	t.Helper()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	bs := cl.DiscoveredBrokers()
	if len(bs) == 0 {
		t.Fatal("no broker discovered")
	}
	return bs[0]
}

// TestACLs: bindings created while no authorizer is set are enforced once
// authorizer.class.name is, after a restart from the same metadata log.
func TestACLs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()

	// Open: topics, and ANONYMOUS may administer ACLs (ALTER on the
	// cluster) and replicate (CLUSTER_ACTION, this node's own requests).
	n := startNode(t, dir, nil)
	cl := newClient(t, n)
	adm := kadm.NewClient(cl)
	for _, tp := range []string{"public", "secret", "pre-x", "prx"} {
		createTopic(t, cl, tp, 1, nil)
	}
	mustCreateACLs(t, adm, kadm.NewACLs().Clusters().Operations(kadm.OpAlter, kadm.OpClusterAction).Allow(anon).AllowHosts("*"))
	cl.Close()
	n.Close()

	n = startNode(t, dir, aclProps(nil))
	cl = newClient(t, n, kgo.RequestRetries(0))
	adm = kadm.NewClient(cl)

	t.Run("metadata hides undescribable topics", func(t *testing.T) {
		req := kmsg.NewPtrMetadataRequest()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 0 {
			t.Fatalf("listed %d topics without DESCRIBE", len(resp.Topics))
		}
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("secret")}}
		resp, err = req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "Metadata secret", resp.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
		if len(resp.Topics[0].Partitions) != 0 {
			t.Fatal("partitions of an unauthorized topic")
		}
	})

	t.Run("auto-create needs CREATE", func(t *testing.T) {
		mustCreateACLs(t, adm, kadm.NewACLs().Topics("auto").Operations(kadm.OpDescribe).Allow(anon).AllowHosts("*"))
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = true
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("auto")}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "Metadata auto-create", resp.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	})

	t.Run("produce without WRITE", func(t *testing.T) {
		wantCode(t, "Produce secret", produceCode(t, cl, "secret"), kerr.TopicAuthorizationFailed)
	})

	t.Run("prefixed allow, and one that does not match", func(t *testing.T) {
		mustCreateACLs(t, adm, kadm.NewACLs().Topics("pre-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite).Allow(anon).AllowHosts("*"))
		wantCode(t, "Produce pre-x", produceCode(t, cl, "pre-x"), nil)
		wantCode(t, "Produce prx", produceCode(t, cl, "prx"), kerr.TopicAuthorizationFailed)
	})

	t.Run("deny beats allow", func(t *testing.T) {
		mustCreateACLs(t, adm, kadm.NewACLs().Topics("pre-x").Operations(kadm.OpWrite).Deny(anon).DenyHosts("*"))
		wantCode(t, "Produce pre-x", produceCode(t, cl, "pre-x"), kerr.TopicAuthorizationFailed)
	})

	t.Run("per-topic APIs", func(t *testing.T) {
		br := direct(t, cl)
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "secret", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}}}
		loResp, err := lo.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "ListOffsets", loResp.Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

		dr := kmsg.NewPtrDeleteRecordsRequest()
		dr.TimeoutMillis = 5000
		dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "secret", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}}}
		drResp, err := dr.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "DeleteRecords", drResp.Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

		dc := kmsg.NewPtrDescribeConfigsRequest()
		dc.Resources = []kmsg.DescribeConfigsRequestResource{
			{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "secret"},
			{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"},
		}
		dcResp, err := dc.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		codes := map[kmsg.ConfigResourceType]int16{}
		for _, r := range dcResp.Resources {
			codes[r.ResourceType] = r.ErrorCode
		}
		wantCode(t, "DescribeConfigs topic", codes[kmsg.ConfigResourceTypeTopic], kerr.TopicAuthorizationFailed)
		wantCode(t, "DescribeConfigs broker", codes[kmsg.ConfigResourceTypeBroker], kerr.ClusterAuthorizationFailed)

		dg := kmsg.NewPtrDeleteGroupsRequest()
		dg.Groups = []string{"other"}
		dgResp, err := dg.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "DeleteGroups", dgResp.Groups[0].ErrorCode, kerr.GroupAuthorizationFailed)
	})

	t.Run("create topics needs CREATE", func(t *testing.T) {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "newt", 1, 1
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 5000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "CreateTopics", resp.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
		mustCreateACLs(t, adm, kadm.NewACLs().Topics("newt").Operations(kadm.OpCreate).Allow(anon).AllowHosts("*"))
		resp, err = req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "CreateTopics with CREATE on the topic", resp.Topics[0].ErrorCode, nil)
	})

	t.Run("delete topics needs DELETE", func(t *testing.T) {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TopicNames = []string{"public"}
		req.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("public")}}
		req.TimeoutMillis = 5000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "DeleteTopics", resp.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	})

	t.Run("groups", func(t *testing.T) {
		commit := kmsg.NewPtrOffsetCommitRequest()
		commit.Group, commit.Generation = "g", -1
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = "pre-x"
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Offset = 1
		ct.Partitions = append(ct.Partitions, cp)
		commit.Topics = append(commit.Topics, ct)
		// Sent to the broker itself: the client's FindCoordinator is
		// denied first (DESCRIBE on the group).
		br := direct(t, cl)
		find := kmsg.NewPtrFindCoordinatorRequest()
		find.CoordinatorKey, find.CoordinatorKeys = "g", []string{"g"}
		findResp, err := find.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		findCode := findResp.ErrorCode
		if len(findResp.Coordinators) == 1 {
			findCode = findResp.Coordinators[0].ErrorCode
		}
		wantCode(t, "FindCoordinator", findCode, kerr.GroupAuthorizationFailed)
		resp, err := commit.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "OffsetCommit without group READ", resp.Topics[0].Partitions[0].ErrorCode, kerr.GroupAuthorizationFailed)

		join := kmsg.NewPtrJoinGroupRequest()
		join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
		join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
		jresp, err := join.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "JoinGroup", jresp.ErrorCode, kerr.GroupAuthorizationFailed)

		mustCreateACLs(t, adm, kadm.NewACLs().Groups("g").Operations(kadm.OpRead).Allow(anon).AllowHosts("*"))
		resp, err = commit.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "OffsetCommit without topic READ", resp.Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.Group = "g"
		fresp, err := fetch.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "OffsetFetch", fresp.ErrorCode, nil)
		if len(fresp.Topics) != 0 {
			t.Fatalf("offsets committed despite the denial: %+v", fresp.Topics)
		}
	})

	t.Run("consumer groups (KIP-848)", func(t *testing.T) {
		br := direct(t, cl)
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.MemberEpoch = "cg", "m1", 0
		hb.RebalanceTimeoutMillis = 10000
		hb.SubscribedTopicNames = []string{"public"}
		hresp, err := hb.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "ConsumerGroupHeartbeat without group READ", hresp.ErrorCode, kerr.GroupAuthorizationFailed)
		mustCreateACLs(t, adm, kadm.NewACLs().Groups("cg").Operations(kadm.OpRead).Allow(anon).AllowHosts("*"))
		hresp, err = hb.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "ConsumerGroupHeartbeat without topic DESCRIBE", hresp.ErrorCode, kerr.TopicAuthorizationFailed)
		if hresp.ErrorMessage == nil || !strings.Contains(*hresp.ErrorMessage, "public") {
			t.Fatalf("error message %v does not name the topic", hresp.ErrorMessage)
		}

		desc := kmsg.NewPtrConsumerGroupDescribeRequest()
		desc.Groups = []string{"cg", "other"}
		dresp, err := desc.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		if len(dresp.Groups) != 2 {
			t.Fatalf("ConsumerGroupDescribe answered %d groups, want 2", len(dresp.Groups))
		}
		// READ on cg implies DESCRIBE; nothing is granted on other.
		for _, g := range dresp.Groups {
			switch {
			case g.Group == "other":
				wantCode(t, "ConsumerGroupDescribe other", g.ErrorCode, kerr.GroupAuthorizationFailed)
			case g.ErrorCode == kerr.GroupAuthorizationFailed.Code:
				t.Fatalf("ConsumerGroupDescribe %s denied despite READ on it", g.Group)
			}
		}
	})

	t.Run("share groups (KIP-932)", func(t *testing.T) {
		br := direct(t, cl)
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.GroupID, hb.MemberID, hb.MemberEpoch = "sg", "m1", 0
		hb.SubscribedTopicNames = []string{"public"}
		hresp, err := hb.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "ShareGroupHeartbeat without group READ", hresp.ErrorCode, kerr.GroupAuthorizationFailed)
		sf := kmsg.NewPtrShareFetchRequest()
		sf.GroupID, sf.MemberID = kmsg.StringPtr("sg"), kmsg.StringPtr("m1")
		sresp, err := sf.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "ShareFetch without group READ", sresp.ErrorCode, kerr.GroupAuthorizationFailed)
		mustCreateACLs(t, adm, kadm.NewACLs().Groups("sg").Operations(kadm.OpRead).Allow(anon).AllowHosts("*"))
		hresp, err = hb.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "ShareGroupHeartbeat without topic DESCRIBE", hresp.ErrorCode, kerr.TopicAuthorizationFailed)
		desc := kmsg.NewPtrShareGroupDescribeRequest()
		desc.GroupIDs = []string{"other"}
		dresp, err := desc.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		if len(dresp.Groups) != 1 {
			t.Fatalf("ShareGroupDescribe answered %d groups", len(dresp.Groups))
		}
		wantCode(t, "ShareGroupDescribe other", dresp.Groups[0].ErrorCode, kerr.GroupAuthorizationFailed)
	})

	t.Run("transactional id", func(t *testing.T) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("tx"), 10000
		resp, err := req.RequestWith(ctx, direct(t, cl))
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "InitProducerId", resp.ErrorCode, kerr.TransactionalIDAuthorizationFailed)
		idem := kmsg.NewPtrInitProducerIDRequest()
		resp, err = idem.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		// WRITE on the prefixed pattern pre- allows idempotence (KIP-679).
		wantCode(t, "InitProducerId idempotent", resp.ErrorCode, nil)
	})

	t.Run("authorized operations", func(t *testing.T) {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeClusterAuthorizedOperations = true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		want := int32(1<<kmsg.ACLOperationAlter | 1<<kmsg.ACLOperationDescribe | 1<<kmsg.ACLOperationClusterAction)
		if resp.ClusterAuthorizedOperations != want {
			t.Fatalf("cluster operations %b, want %b", resp.ClusterAuthorizedOperations, want)
		}
		mreq := kmsg.NewPtrMetadataRequest()
		mreq.IncludeTopicAuthorizedOperations = true
		mreq.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("prx")}}
		mresp, err := mreq.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "Metadata prx", mresp.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	})

	t.Run("describe and delete acls", func(t *testing.T) {
		described, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics("pre-x-y").ResourcePatternType(kadm.ACLPatternMatch).Operations(kadm.OpAny).Allow().AllowHosts().Deny().DenyHosts())
		if err != nil {
			t.Fatal(err)
		}
		// MATCH: the prefixed pre- ALLOW; not the literal pre-x DENY.
		var got int
		for _, d := range described {
			got += len(d.Described)
		}
		if got != 1 {
			t.Fatalf("MATCH pre-x-y described %d bindings, want 1: %+v", got, described)
		}
		deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Topics("pre-x").Operations(kadm.OpWrite).Deny(anon).DenyHosts("*"))
		if err != nil || len(deleted) != 1 || len(deleted[0].Deleted) != 1 {
			t.Fatalf("DeleteACLs: %v %+v", err, deleted)
		}
		wantCode(t, "Produce pre-x after the DENY is removed", produceCode(t, cl, "pre-x"), nil)
	})

	t.Run("acl admin needs ALTER", func(t *testing.T) {
		if _, err := adm.DeleteACLs(ctx, kadm.NewACLs().Clusters().Operations(kadm.OpAlter).Allow(anon).AllowHosts("*")); err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrCreateACLsRequest()
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "secret", kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = anon, "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, c)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "CreateAcls without ALTER", resp.Results[0].ErrorCode, kerr.ClusterAuthorizationFailed)
	})

	t.Run("SCRAM credentials need DESCRIBE and ALTER on the cluster", func(t *testing.T) {
		dr := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		dr.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "mallory"}}
		dresp, err := dr.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "DescribeUserScramCredentials without DESCRIBE", dresp.ErrorCode, kerr.ClusterAuthorizationFailed)
		if len(dresp.Results) != 1 || dresp.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("DescribeUserScramCredentials results: %+v", dresp.Results)
		}
		ar := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations = "mallory", 1, 4096
		up.Salt, up.SaltedPassword = []byte("0123456789abcdef"), make([]byte, 32)
		ar.Upsertions = append(ar.Upsertions, up)
		aresp, err := ar.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(aresp.Results) != 1 || aresp.Results[0].User != "mallory" {
			t.Fatalf("AlterUserScramCredentials results: %+v", aresp.Results)
		}
		wantCode(t, "AlterUserScramCredentials without ALTER", aresp.Results[0].ErrorCode, kerr.ClusterAuthorizationFailed)
	})
	cl.Close()
	n.Close()

	// No state changed: seen without an authorizer.
	n = startNode(t, dir, nil)
	cl = newClient(t, n)
	adm = kadm.NewClient(cl)
	if o := endOffset(t, cl, "secret"); o != 0 {
		t.Errorf("secret has %d records after denied produces", o)
	}
	if o := endOffset(t, cl, "prx"); o != 0 {
		t.Errorf("prx has %d records after denied produces", o)
	}
	if o := endOffset(t, cl, "pre-x"); o != 2 {
		t.Errorf("pre-x has %d records, want the 2 allowed", o)
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !topics.Has("public") || topics.Has("auto") || !topics.Has("newt") {
		t.Errorf("topics after the denials: %v", topics.Names())
	}
	scram, err := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest().RequestWith(ctx, cl)
	if err != nil || scram.ErrorCode != 0 || len(scram.Results) != 0 {
		t.Errorf("SCRAM credentials after the denied AlterUserScramCredentials: %v %+v", err, scram)
	}
	ctrlACL, err := adm.DescribeACLs(ctx, kadm.NewACLs().Clusters().Operations(kadm.OpAny).Allow().AllowHosts().Deny().DenyHosts())
	if err != nil || len(ctrlACL) != 1 || len(ctrlACL[0].Described) != 1 {
		t.Errorf("cluster ACLs after the denied CreateAcls: %v %+v", err, ctrlACL)
	}
}

// TestACLSuperUsersAndNoACL: super.users are allowed whatever the
// bindings; allow.everyone.if.no.acl.found opens only resources no
// binding names.
func TestACLSuperUsersAndNoACL(t *testing.T) {
	t.Run("super user", func(t *testing.T) {
		n := startNode(t, t.TempDir(), aclProps(map[string]string{"super.users": "User:admin;" + anon}))
		cl := newClient(t, n, kgo.RequestRetries(0))
		adm := kadm.NewClient(cl)
		createTopic(t, cl, "t", 1, nil)
		mustCreateACLs(t, adm, kadm.NewACLs().Topics("t").Operations(kadm.OpAll).Deny(anon).DenyHosts("*"))
		wantCode(t, "Produce as a super user", produceCode(t, cl, "t"), nil)
	})
	t.Run("allow.everyone.if.no.acl.found", func(t *testing.T) {
		n := startNode(t, t.TempDir(), aclProps(map[string]string{"allow.everyone.if.no.acl.found": "true"}))
		cl := newClient(t, n, kgo.RequestRetries(0))
		adm := kadm.NewClient(cl)
		createTopic(t, cl, "open", 1, nil)
		createTopic(t, cl, "bobs", 1, nil)
		mustCreateACLs(t, adm, kadm.NewACLs().Topics("bobs").Operations(kadm.OpWrite).Allow("User:bob").AllowHosts("*"))
		wantCode(t, "Produce to a topic no ACL names", produceCode(t, cl, "open"), nil)
		wantCode(t, "Produce to bob's topic", produceCode(t, cl, "bobs"), kerr.TopicAuthorizationFailed)
	})
}

// TestACLsKafkaPython: kafka-python's admin client (Debian's
// python3-kafka; python3-confluent-kafka 1.7 has no ACL admin) creates,
// describes and deletes bindings, and the authorizer enforces them.
func TestACLsKafkaPython(t *testing.T) {
	if err := exec.Command(python3, "-c", "import kafka").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3-kafka is required in CI: %v", err)
		}
		t.Skip("python3-kafka not installed (apt-get install python3-kafka)")
	}
	n := startNode(t, t.TempDir(), aclProps(map[string]string{"allow.everyone.if.no.acl.found": "true"}))
	cl := newClient(t, n, kgo.RequestRetries(0))
	createTopic(t, cl, "py", 1, nil)
	script := `
import sys
from kafka.admin import KafkaAdminClient, ACL, ACLFilter, ResourcePattern, ResourcePatternFilter, ResourceType, ACLOperation, ACLPermissionType, ACLResourcePatternType
adm = KafkaAdminClient(bootstrap_servers=sys.argv[1], client_id='acl-test')
res = adm.create_acls([
    ACL('User:bob', '*', ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.TOPIC, 'py')),
    ACL('User:bob', '*', ACLOperation.READ, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.TOPIC, 'p', ACLResourcePatternType.PREFIXED)),
])
assert not res['failed'], res
acls, err = adm.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, ResourcePatternFilter(ResourceType.TOPIC, 'py', ACLResourcePatternType.MATCH)))
print('described', len(acls), err.__name__)
for a in sorted(acls, key=lambda a: a.operation.name):
    print(a.principal, a.operation.name, a.permission_type.name, a.resource_pattern.pattern_type.name, a.resource_pattern.resource_name)
`
	out, stderr, err := stdoutOnly(exec.Command(python3, "-c", script, n.Addr()))
	if err != nil {
		t.Fatalf("kafka-python: %v\n%s\nstderr:\n%s", err, out, stderr)
	}
	want := "described 2 NoError\nUser:bob READ ALLOW PREFIXED p\nUser:bob WRITE ALLOW LITERAL py\n"
	if string(out) != want {
		t.Fatalf("kafka-python printed\n%s\nwant\n%s\nstderr:\n%s", out, want, stderr)
	}
	// Now that bindings name py, ANONYMOUS may no longer write to it.
	wantCode(t, "Produce py as ANONYMOUS", produceCode(t, cl, "py"), kerr.TopicAuthorizationFailed)
}

// TestACLCluster: a 3-node cluster with the authorizer and its
// inter-broker principal (User:ANONYMOUS over PLAINTEXT) a super user
// registers, replicates with acks=all, and forwards admin requests to the
// active controller; the CreateAcls forwarded from any node lands in the
// metadata log every node reads.
func TestACLCluster(t *testing.T) {
	c := startCluster(t, 3, aclProps(map[string]string{"super.users": anon, "min.insync.replicas": "2"}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addrs := c.Addrs()
	for i, addr := range addrs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("replicated"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.AllowAutoTopicCreation())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if i == 0 {
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, nil, "replicated"); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce through node %d: %v", i, err)
		}
		name := fmt.Sprintf("t%d", i)
		mustCreateACLs(t, kadm.NewClient(cl), kadm.NewACLs().Topics(name).Operations(kadm.OpRead).Allow("User:bob").AllowHosts("*"))
	}
	for _, addr := range addrs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		// DescribeAcls reads the node it is sent to.
		br := direct(t, cl)
		waitFor(t, 10*time.Second, "every node sees the 3 bindings", func() bool {
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			d, err := req.RequestWith(ctx, br)
			return err == nil && len(d.Resources) == 3
		})
	}
}

// TestACLClusterRestart: three voters with an authorizer whose principal
// (ANONYMOUS on PLAINTEXT) is no super user start (no ACL names the
// cluster yet: allow.everyone.if.no.acl.found), and, once an ACL allows
// it CLUSTER_ACTION on the cluster, start again together: a restarted
// voter authorizes the leader's raft connection with its broker's ACLs
// before it caught up with the quorum (waiting for the catch-up before
// the broker was made, no voter accepted a raft connection: neither
// start finished).
func TestACLClusterRestart(t *testing.T) {
	c := startCluster(t, 3, aclProps(map[string]string{"allow.everyone.if.no.acl.found": "true"}))
	_, adm := clusterClients(t, c)
	mustCreateACLs(t, adm, kadm.NewACLs().Clusters().Operations(kadm.OpClusterAction, kadm.OpAlter, kadm.OpDescribe).Allow(anon).AllowHosts("*"))
	ids := c.Controllers()
	for _, id := range ids {
		if err := c.StopNode(id); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, len(ids))
	for _, id := range ids {
		go func() { errs <- c.StartNode(ctx, id) }()
	}
	for range ids {
		if err := <-errs; err != nil {
			t.Fatalf("restarting together: %v", err)
		}
	}
}
