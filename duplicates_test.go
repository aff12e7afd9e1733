package samsa_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/wire"
)

// TestAdminDuplicateNames: a topic named twice in CreateTopics,
// CreatePartitions or DeleteTopics is left alone and answered once with
// INVALID_REQUEST, as Kafka's ControllerApis does ("Duplicate topic
// name."), while the other topics of the request are carried out; so are
// DeleteTopics v6 entries naming a topic by both name and id, or by
// neither, and an id listed twice. A partition listed twice in ListOffsets
// gets INVALID_REQUEST in each entry.
func TestAdminDuplicateNames(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := wire.NewClient(n.Addr(), "test", 64<<20)
	defer cl.Close()
	request := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}
	type result struct {
		code int16
		msg  string
	}
	msg := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	topicIDs := func() map[string][16]byte {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		resp := request(req).(*kmsg.MetadataResponse)
		ids := map[string][16]byte{}
		for _, mt := range resp.Topics {
			if mt.ErrorCode == 0 {
				ids[*mt.Topic] = mt.TopicID
			}
		}
		return ids
	}
	check := func(what string, got []result, want ...result) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: results %v, want %v", what, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: results %v, want %v", what, got, want)
			}
		}
	}
	dupName := result{kerr.InvalidRequest.Code, "Duplicate topic name."}
	ok := result{}

	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(7)
	create.TimeoutMillis = 10000
	for _, name := range []string{"twice", "once", "twice", "other"} {
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, 1, 1
		create.Topics = append(create.Topics, ct)
	}
	var got []result
	for _, rt := range request(create).(*kmsg.CreateTopicsResponse).Topics {
		got = append(got, result{rt.ErrorCode, rt.Topic + ": " + msg(rt.ErrorMessage)})
	}
	check("CreateTopics", got, result{kerr.InvalidRequest.Code, "twice: Duplicate topic name."}, result{0, "once: "}, result{0, "other: "})
	ids := topicIDs()
	if _, exists := ids["twice"]; exists || len(ids) != 2 {
		t.Fatalf("topics after CreateTopics: %v", ids)
	}

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.SetVersion(3)
	cp.TimeoutMillis = 10000
	for _, tc := range []struct {
		name  string
		count int32
	}{{"once", 3}, {"other", 2}, {"once", 4}} {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = tc.name, tc.count
		cp.Topics = append(cp.Topics, rt)
	}
	got = nil
	for _, rt := range request(cp).(*kmsg.CreatePartitionsResponse).Topics {
		got = append(got, result{rt.ErrorCode, msg(rt.ErrorMessage)})
	}
	check("CreatePartitions", got, dupName, ok)
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.SetVersion(12)
	md := request(mreq).(*kmsg.MetadataResponse)
	for _, mt := range md.Topics {
		if want := map[string]int{"once": 1, "other": 2}[*mt.Topic]; len(mt.Partitions) != want {
			t.Fatalf("%s has %d partitions after CreatePartitions, want %d", *mt.Topic, len(mt.Partitions), want)
		}
	}

	// The broker hosts a new partition once its log is made, a moment
	// after CreatePartitions answered (NOT_LEADER_OR_FOLLOWER before).
	listOffsets := func(partitions ...int32) *kmsg.ListOffsetsResponse {
		t.Helper()
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.SetVersion(7)
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "other"
		for _, p := range partitions {
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition, lp.Timestamp = p, -1
			lt.Partitions = append(lt.Partitions, lp)
		}
		lo.Topics = append(lo.Topics, lt)
		return request(lo).(*kmsg.ListOffsetsResponse)
	}
	waitFor(t, 10*time.Second, "partition 1 of other hosted", func() bool {
		rt := listOffsets(1).Topics
		return len(rt) == 1 && len(rt[0].Partitions) == 1 && rt[0].Partitions[0].ErrorCode == 0
	})
	got = nil
	for _, rt := range listOffsets(0, 1, 0).Topics {
		for _, rp := range rt.Partitions {
			got = append(got, result{rp.ErrorCode, ""})
		}
	}
	check("ListOffsets", got, result{kerr.InvalidRequest.Code, ""}, ok, result{kerr.InvalidRequest.Code, ""})

	// DeleteTopics v6: by name twice, by id twice, by both, by neither.
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(6)
	del.TimeoutMillis = 10000
	add := func(name *string, id [16]byte) {
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic, dt.TopicID = name, id
		del.Topics = append(del.Topics, dt)
	}
	add(kmsg.StringPtr("once"), [16]byte{})
	add(nil, ids["other"])
	add(kmsg.StringPtr("once"), [16]byte{})
	add(nil, ids["other"])
	add(kmsg.StringPtr("other"), ids["other"])
	add(nil, [16]byte{})
	got = nil
	for _, rt := range request(del).(*kmsg.DeleteTopicsResponse).Topics {
		got = append(got, result{rt.ErrorCode, msg(rt.Topic) + ": " + msg(rt.ErrorMessage)})
	}
	check("DeleteTopics v6", got,
		result{kerr.InvalidRequest.Code, "once: Duplicate topic name."},
		result{kerr.InvalidRequest.Code, ": Duplicate topic id."},
		result{kerr.InvalidRequest.Code, "other: You may not specify both topic name and topic id."},
		result{kerr.InvalidRequest.Code, ": Neither topic name nor id were specified."})
	if ids := topicIDs(); len(ids) != 2 {
		t.Fatalf("topics after refused deletes: %v", ids)
	}

	// v5 names; the topic named once is deleted.
	del = kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(5)
	del.TimeoutMillis = 10000
	del.TopicNames = []string{"other", "once", "other"}
	got = nil
	for _, rt := range request(del).(*kmsg.DeleteTopicsResponse).Topics {
		got = append(got, result{rt.ErrorCode, msg(rt.Topic) + ": " + msg(rt.ErrorMessage)})
	}
	check("DeleteTopics v5", got, result{kerr.InvalidRequest.Code, "other: Duplicate topic name."}, result{0, "once: "})
	if ids := topicIDs(); len(ids) != 1 || ids["other"] == [16]byte{} {
		t.Fatalf("topics after DeleteTopics: %v", ids)
	}
}
