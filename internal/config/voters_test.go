package config

import (
	"strings"
	"testing"
)

func TestParseVoters(t *testing.T) {
	vs, err := ParseVoters("1@localhost:9093, 2@[::1]:9094,0@10.0.0.3:9095")
	if err != nil {
		t.Fatal(err)
	}
	want := []Voter{{1, "localhost", 9093}, {2, "::1", 9094}, {0, "10.0.0.3", 9095}}
	if len(vs) != len(want) {
		t.Fatalf("got %v", vs)
	}
	for i := range want {
		if vs[i] != want[i] {
			t.Fatalf("voter %d: got %v want %v", i, vs[i], want[i])
		}
	}
	if vs[1].Addr() != "[::1]:9094" || vs[0].String() != "1@localhost:9093" {
		t.Fatalf("addr %s string %s", vs[1].Addr(), vs[0])
	}
	for _, bad := range []string{"1localhost:9093", "x@h:1", "-1@h:1", "1@h", "1@:9093", "1@h:0", "1@h:65536", "1@h:1,1@g:2"} {
		if _, err := ParseVoters(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if vs, err := ParseVoters(""); err != nil || vs != nil {
		t.Fatalf("empty: %v %v", vs, err)
	}
}

func TestQuorumVotersNode(t *testing.T) {
	n, err := Parse(map[string]string{"node.id": "2", "controller.quorum.voters": "1@h:1,2@h:2,3@h:3"})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.QuorumVoters) != 3 || n.QuorumVoters[1].ID != 2 {
		t.Fatalf("voters %v", n.QuorumVoters)
	}
	_, err = Parse(map[string]string{"node.id": "4", "controller.quorum.voters": "1@h:1,2@h:2,3@h:3"})
	if err == nil || !strings.Contains(err.Error(), "not a voter") {
		t.Fatalf("controller outside the voters: %v", err)
	}
	if _, err := Parse(map[string]string{"node.id": "4", "process.roles": "broker", "controller.quorum.voters": "1@h:1"}); err != nil {
		t.Fatalf("broker outside the voters: %v", err)
	}
}
