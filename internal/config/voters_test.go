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
	if _, err := Parse(map[string]string{"node.id": "4", "process.roles": "broker", "listeners": "PLAINTEXT://h:9092", "controller.quorum.voters": "1@h:1"}); err != nil {
		t.Fatalf("broker outside the voters: %v", err)
	}
}

func TestProcessRoles(t *testing.T) {
	const voters = "1@h:1,2@h:2,3@h:3"
	for _, tc := range []struct {
		name  string
		props map[string]string
		want  string // error substring, "" for none
	}{
		{"controller", map[string]string{"process.roles": "controller", "node.id": "1", "listeners": "CONTROLLER://h:1", "controller.quorum.voters": voters}, ""},
		{"controller with two controller listeners", map[string]string{"process.roles": "controller", "node.id": "1", "listeners": "CONTROLLER://h:1,C2://h:5", "controller.listener.names": "CONTROLLER,C2", "controller.quorum.voters": voters}, ""},
		{"controller without voters", map[string]string{"process.roles": "controller", "listeners": "CONTROLLER://h:1"}, "needs the quorum's voters"},
		{"controller not a voter", map[string]string{"process.roles": "controller", "node.id": "7", "listeners": "CONTROLLER://h:1", "controller.quorum.voters": voters}, "not a voter"},
		{"controller with a broker listener", map[string]string{"process.roles": "controller", "node.id": "1", "controller.quorum.voters": voters}, "only controller listeners"},
		{"controller without a controller listener", map[string]string{"process.roles": "controller", "node.id": "1", "listeners": "CONTROLLER://h:1", "controller.listener.names": "OTHER", "controller.quorum.voters": voters}, "only controller listeners"},
		{"broker", map[string]string{"process.roles": "broker", "node.id": "4", "listeners": "PLAINTEXT://h:9", "controller.quorum.voters": voters}, ""},
		{"broker without voters", map[string]string{"process.roles": "broker", "listeners": "PLAINTEXT://h:9"}, "needs the controllers"},
		{"broker that is a voter", map[string]string{"process.roles": "broker", "node.id": "2", "listeners": "PLAINTEXT://h:9", "controller.quorum.voters": voters}, "is a voter"},
		{"broker with a controller listener", map[string]string{"process.roles": "broker", "node.id": "4", "controller.quorum.voters": voters}, "no controller listener"},
		{"broker without a broker listener", map[string]string{"process.roles": "broker", "node.id": "4", "listeners": "CONTROLLER://h:1", "controller.quorum.voters": voters}, "no broker listener"},
		{"combined voter without a controller listener", map[string]string{"node.id": "1", "listeners": "PLAINTEXT://h:9", "controller.quorum.voters": voters}, "no controller listener"},
		{"combined single node without a controller listener", map[string]string{"listeners": "PLAINTEXT://h:9"}, ""},
		{"no controller listener names", map[string]string{"controller.listener.names": ""}, "controller.listener.names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.props)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}
