package broker

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFilterEntries runs every API of entryAuths through filterEntries
// with a check that denies the entries named "no": the request keeps the
// others, and the response gains the denied entries with the code and
// the fields Kafka sets (the -1s of ListOffsets, OffsetForLeaderEpoch and
// DeleteRecords, the message of CreateTopics and CreatePartitions).
func TestFilterEntries(t *testing.T) {
	topicAuth := strconv.Itoa(int(kerr.TopicAuthorizationFailed.Code))
	msg, _ := json.Marshal(kerr.TopicAuthorizationFailed.Message)
	for _, tc := range []struct {
		key       kmsg.Key
		req, kept string // the request, and the entries it keeps (null: none)
		denied    string // the response's entries
	}{
		{kmsg.OffsetCommit,
			`{"Topics":[{"Topic":"ok","Partitions":[{"Partition":0}]},{"Topic":"no","Partitions":[{"Partition":0},{"Partition":3}]}]}`,
			`[{"Topic":"ok","Partitions":[{"Partition":0}]}]`,
			`[{"Topic":"no","Partitions":[{"Partition":0,"ErrorCode":CODE},{"Partition":3,"ErrorCode":CODE}]}]`},
		{kmsg.TxnOffsetCommit,
			`{"Topics":[{"Topic":"no","Partitions":[{"Partition":2}]},{"Topic":"ok","Partitions":[{"Partition":0}]}]}`,
			`[{"Topic":"ok","Partitions":[{"Partition":0}]}]`,
			`[{"Topic":"no","Partitions":[{"Partition":2,"ErrorCode":CODE}]}]`},
		{kmsg.OffsetDelete,
			`{"Topics":[{"Topic":"no","Partitions":[{"Partition":1}]}]}`,
			`null`,
			`[{"Topic":"no","Partitions":[{"Partition":1,"ErrorCode":CODE}]}]`},
		{kmsg.OffsetForLeaderEpoch,
			`{"Topics":[{"Topic":"no","Partitions":[{"Partition":1,"LeaderEpoch":4}]},{"Topic":"ok","Partitions":[{"Partition":0}]}]}`,
			`[{"Topic":"ok","Partitions":[{"Partition":0}]}]`,
			`[{"Topic":"no","Partitions":[{"Partition":1,"ErrorCode":CODE,"LeaderEpoch":-1,"EndOffset":-1}]}]`},
		{kmsg.ListOffsets,
			`{"Topics":[{"Topic":"no","Partitions":[{"Partition":5,"Timestamp":-2}]}]}`,
			`null`,
			`[{"Topic":"no","Partitions":[{"Partition":5,"ErrorCode":CODE,"Timestamp":-1,"Offset":-1,"LeaderEpoch":-1}]}]`},
		{kmsg.DescribeProducers,
			`{"Topics":[{"Topic":"ok","Partitions":[1]},{"Topic":"no","Partitions":[0,1]}]}`,
			`[{"Topic":"ok","Partitions":[1]}]`,
			`[{"Topic":"no","Partitions":[{"Partition":0,"ErrorCode":CODE},{"Partition":1,"ErrorCode":CODE}]}]`},
		{kmsg.DeleteRecords,
			`{"Topics":[{"Topic":"no","Partitions":[{"Partition":0,"Offset":10}]}]}`,
			`null`,
			`[{"Topic":"no","Partitions":[{"Partition":0,"ErrorCode":CODE,"LowWatermark":-1}]}]`},
		// A name listed twice is decided and answered once.
		{kmsg.CreateTopics,
			`{"Topics":[{"Topic":"no","NumPartitions":3},{"Topic":"ok","NumPartitions":1},{"Topic":"no","NumPartitions":2}]}`,
			`[{"Topic":"ok","NumPartitions":1}]`,
			`[{"Topic":"no","ErrorCode":CODE,"ErrorMessage":MSG,"NumPartitions":-1,"ReplicationFactor":-1}]`},
		{kmsg.CreatePartitions,
			`{"Topics":[{"Topic":"no","Count":3},{"Topic":"no","Count":4}]}`,
			`null`,
			`[{"Topic":"no","ErrorCode":CODE,"ErrorMessage":MSG}]`},
		{kmsg.AlterConfigs,
			`{"Resources":[{"ResourceType":"TOPIC","ResourceName":"no"},{"ResourceType":"BROKER","ResourceName":"ok"}]}`,
			`[{"ResourceType":"BROKER","ResourceName":"ok"}]`,
			`[{"ResourceType":"TOPIC","ResourceName":"no","ErrorCode":CODE}]`},
		{kmsg.IncrementalAlterConfigs,
			`{"Resources":[{"ResourceType":"BROKER","ResourceName":"1"},{"ResourceType":"TOPIC","ResourceName":"no"}]}`,
			`[{"ResourceType":"BROKER","ResourceName":"1"}]`,
			`[{"ResourceType":"TOPIC","ResourceName":"no","ErrorCode":CODE}]`},
		{kmsg.DescribeConfigs,
			`{"Resources":[{"ResourceType":"TOPIC","ResourceName":"no"},{"ResourceType":"TOPIC","ResourceName":"no"}]}`,
			`null`,
			`[{"ResourceType":"TOPIC","ResourceName":"no","ErrorCode":CODE},{"ResourceType":"TOPIC","ResourceName":"no","ErrorCode":CODE}]`},
	} {
		t.Run(tc.key.Name(), func(t *testing.T) {
			if _, ok := entryAuths[tc.key]; !ok {
				t.Fatalf("%s is not in entryAuths", tc.key.Name())
			}
			req := kmsg.RequestForKey(int16(tc.key))
			req.SetVersion(req.MaxVersion())
			if err := json.Unmarshal([]byte(tc.req), req); err != nil {
				t.Fatal(err)
			}
			calls := 0
			deny := func(e entry) int16 {
				calls++
				if e.name == "no" {
					return kerr.TopicAuthorizationFailed.Code
				}
				return 0
			}
			out, finish := filterEntries(req, deny, 0)
			if out == req {
				t.Fatal("the request came back whole although an entry is denied")
			}
			if list := entryList(reflect.ValueOf(req)); list.Len() != strings.Count(tc.req, `"Topic":`)+strings.Count(tc.req, `"ResourceName":`) {
				t.Fatal("filterEntries changed the request it was given")
			}
			wantKept := reflect.New(entryList(reflect.ValueOf(req)).Type())
			if err := json.Unmarshal([]byte(tc.kept), wantKept.Interface()); err != nil {
				t.Fatal(err)
			}
			if got := entryList(reflect.ValueOf(out)); !reflect.DeepEqual(got.Interface(), wantKept.Elem().Interface()) {
				t.Errorf("kept %+v, want %+v", got.Interface(), wantKept.Elem().Interface())
			}
			wantResp := req.ResponseKind()
			denied := strings.NewReplacer("CODE", topicAuth, "MSG", string(msg)).Replace(tc.denied)
			if err := json.Unmarshal([]byte(`{"`+entryListName(req)+`":`+denied+`}`), wantResp); err != nil {
				t.Fatal(err)
			}
			if got := finish(req.ResponseKind()); !reflect.DeepEqual(got, wantResp) {
				t.Errorf("response %+v, want %+v", got, wantResp)
			}

			// A check of the whole request that failed answers every
			// entry with its code without the handler, asking check
			// nothing.
			calls = 0
			out, finish = filterEntries(req, deny, kerr.GroupAuthorizationFailed.Code)
			if out != nil {
				t.Fatalf("whole denial kept the request %+v", out)
			}
			resp := entryList(reflect.ValueOf(finish(nil)))
			if resp.Len() == 0 || calls != 0 {
				t.Fatalf("whole denial: %d entries answered, check called %d times", resp.Len(), calls)
			}

			// ... also when there are none.
			empty := reflect.New(reflect.TypeOf(req).Elem())
			empty.Elem().Set(reflect.ValueOf(req).Elem())
			entryList(empty).Set(reflect.Zero(entryList(empty).Type()))
			if out, _ := filterEntries(empty.Interface().(kmsg.Request), deny, kerr.GroupAuthorizationFailed.Code); out != nil {
				t.Fatal("whole denial of a request without entries let it through")
			}

			// Nothing denied: the request itself goes on.
			if out, _ := filterEntries(req, func(entry) int16 { return 0 }, 0); out != req {
				t.Error("a request with nothing denied was copied")
			}
		})
	}
}

// entryListName is the name of req's list of entries.
func entryListName(req kmsg.Request) string {
	if _, ok := reflect.TypeOf(req).Elem().FieldByName("Resources"); ok {
		return "Resources"
	}
	return "Topics"
}

// TestClusterDenied checks that the APIs of gateCluster are answered with
// CLUSTER_AUTHORIZATION_FAILED at the top level where their response has
// an error code, and that BrokerRegistration's epoch is -1.
func TestClusterDenied(t *testing.T) {
	code := kerr.ClusterAuthorizationFailed.Code
	for _, k := range []kmsg.Key{
		kmsg.AlterPartitionAssignments, kmsg.ListPartitionReassignments, kmsg.DescribeACLs,
		kmsg.DescribeClientQuotas, kmsg.DescribeUserSCRAMCredentials, kmsg.BrokerRegistration,
		kmsg.BrokerHeartbeat, kmsg.AlterPartition, kmsg.AllocateProducerIDs, kmsg.DescribeQuorum,
		kmsg.DescribeLogDirs, kmsg.ElectLeaders, kmsg.AssignReplicasToDirs,
	} {
		req := kmsg.RequestForKey(int16(k))
		req.SetVersion(req.MaxVersion())
		resp := clusterDenied(req)
		if got := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode").Int(); got != int64(code) {
			t.Errorf("%s: ErrorCode %d, want %d", k.Name(), got, code)
		}
		if resp.Key() != req.Key() || resp.GetVersion() != req.GetVersion() {
			t.Errorf("%s: answered with %s v%d", k.Name(), kmsg.NameForKey(resp.Key()), resp.GetVersion())
		}
	}
	if r := clusterDenied(kmsg.NewPtrBrokerRegistrationRequest()).(*kmsg.BrokerRegistrationResponse); r.BrokerEpoch != -1 {
		t.Errorf("BrokerRegistration: epoch %d, want -1", r.BrokerEpoch)
	}
	acls := kmsg.NewPtrCreateACLsRequest()
	acls.Creations = make([]kmsg.CreateACLsRequestCreation, 2)
	if r := clusterDenied(acls).(*kmsg.CreateACLsResponse); len(r.Results) != 2 || r.Results[1].ErrorCode != code {
		t.Errorf("CreateACLs: %+v", r.Results)
	}
}
