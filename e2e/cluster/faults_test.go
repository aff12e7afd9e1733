package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/proctest"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/wire"
)

// pause waits d of real time: the processes under test run meanwhile.
func pause(d time.Duration) {
	t := time.NewTimer(d)
	<-t.C
}

// TestKillPartitionLeaders: 3 nodes, RF 3, min.insync.replicas=2,
// acks=all. While records of the Debian data set are produced, the leader
// of each partition in turn is killed with SIGKILL and restarted once
// another replica leads. For partitions after the first, the followers are
// paused before the kill and a record is written to the leader with
// acks=1, so that the leader surely holds a record no follower has: the
// restarted broker must truncate that tail (KIP-101/KIP-279), and the
// record must be gone, and the broker must rejoin the ISR. Every
// acknowledged (acks=all) record is read back once, at its offset.
//
// The producer runs without retries (each record sent once) and, as a
// second subtest, as franz-go's default idempotent producer that retries:
// then the brokers must drop the duplicates of retried batches, also
// after the partition changed leader.
//
// It runs on 3 combined nodes and on 3 controllers with 3 brokers.
func TestKillPartitionLeaders(t *testing.T) {
	t.Run("combined/once", func(t *testing.T) { killPartitionLeaders(t, layouts[0].cfg, false) })
	t.Run("combined/idempotent", func(t *testing.T) { killPartitionLeaders(t, layouts[0].cfg, true) })
	t.Run("separate/once", func(t *testing.T) { killPartitionLeaders(t, layouts[1].cfg, false) })
}

func killPartitionLeaders(t *testing.T, layout proctest.ClusterConfig, idempotent bool) {
	rounds, lines, rate := 1, 5000, 2000
	if *longRun {
		rounds, lines, rate = 3, 0, 5000
	}
	keys, values := dataset(t, lines)
	c := startLayout(t, layout)
	const topic, partitions = "debian", 3
	createTopic(t, c, newClient(t, c), topic, partitions, map[string]string{"min.insync.replicas": "2"})
	p := startProducerMode(t, c, topic, keys, values, rate, idempotent)
	p.waitAcks(t, 1000, 30*time.Second)
	absent := map[string]bool{}

	for round := range rounds {
		for part := int32(0); part < partitions; part++ {
			all := others(c)
			leader := mustView(t, c, topic, all...).parts[part].leader
			if leader < 0 {
				t.Fatalf("partition %d has no leader", part)
			}
			followers := others(c, leader)
			divergent := part > 0
			if divergent {
				// A record written with acks=1 while no follower runs is
				// on the leader alone: a tail the next leader lacks.
				for _, f := range followers {
					c.Node(f).Pause()
				}
				// Fetches the followers sent before the pause are
				// answered (into their sockets) within the follower
				// fetch wait of 500 ms; no new fetch comes after that.
				pause(1200 * time.Millisecond)
				v := fmt.Sprintf("unreplicated-%d-%d", round, part)
				direct := wire.NewClient(c.Node(leader).Addr(), "unreplicated-writer", 16<<20)
				code, base := produceDirect(t, direct, topic, part, 1, v)
				direct.Close()
				if code != 0 {
					t.Fatalf("acks=1 write to the leader of partition %d: %v", part, kerr.ErrorForCode(code))
				}
				t.Logf("record %s at offset %d on node %d only", v, base, leader)
				absent[v] = true
			}
			t.Logf("round %d: killing node %d, leader of partition %d (divergent tail: %v)", round, leader, part, divergent)
			c.Node(leader).Kill()
			if divergent {
				for _, f := range followers {
					c.Node(f).Resume()
				}
			}
			waitFor(t, 30*time.Second, fmt.Sprintf("a new leader of partition %d", part), func() bool {
				v, err := view(c.Node(followers[0]).Addr(), topic)
				l := v.parts[part].leader
				return err == nil && l >= 0 && l != leader
			})
			p.waitAcks(t, 500, 30*time.Second)
			c.Node(leader).Restart()
			waitFor(t, 60*time.Second, fmt.Sprintf("node %d back in every ISR", leader), func() bool {
				v, err := view(c.Node(followers[0]).Addr(), topic)
				if err != nil {
					return false
				}
				for _, ps := range v.parts {
					if !slices.Contains(ps.isr, leader) {
						return false
					}
				}
				return true
			})
			if divergent {
				logs := c.Node(leader).Logs()
				if !hasLine(logs, "truncating diverged follower", "topic="+topic, fmt.Sprintf("partition=%d", part)) {
					t.Errorf("node %d did not truncate its tail of partition %d after restart", leader, part)
				}
			}
			p.waitAcks(t, 500, 30*time.Second)
		}
	}
	p.stop()
	p.verify(t, c, partitions, absent)
	noStaleMetadata(t, p)
}

// noStaleMetadata fails the test when a broker answered the producer
// UNKNOWN_TOPIC_OR_PARTITION for its topic, which exists throughout: a
// restarted node served clients before its metadata caught up.
func noStaleMetadata(t *testing.T, p *producer) {
	t.Helper()
	for msg, n := range p.failures() {
		if strings.Contains(msg, "UNKNOWN_TOPIC_OR_PARTITION") {
			t.Errorf("%d records failed with %s", n, msg)
		}
	}
}

// TestPauseFollowers: a follower stopped with SIGSTOP past
// replica.lag.time.max.ms leaves the ISR and acks=all writes go on; with a
// second follower stopped, acks=all writes are not acknowledged (the ISR
// cannot shrink below two without a metadata quorum, so they time out)
// while a topic with min.insync.replicas=3 answers NOT_ENOUGH_REPLICAS;
// once both continue they rejoin the ISR and writes are acknowledged again.
func TestPauseFollowers(t *testing.T) {
	rounds := 1
	if *longRun {
		rounds = 3
	}
	keys, values := dataset(t, 2000)
	c := startCluster(t, false)
	cl := newClient(t, c)
	const topic, strict = "pause", "pause-strict"
	createTopic(t, c, cl, topic, 1, map[string]string{"min.insync.replicas": "2"})
	createTopic(t, c, cl, strict, 1, map[string]string{"min.insync.replicas": "3"})
	p := startProducer(t, c, topic, keys, values, 1000)
	p.waitAcks(t, 500, 30*time.Second)

	start := time.Now()
	since := func() time.Duration { return time.Since(start).Round(100 * time.Millisecond) }
	for round := range rounds {
		leader := mustView(t, c, topic, others(c)...).parts[0].leader
		followers := others(c, leader)
		first, second := c.Node(followers[0]), c.Node(followers[1])
		t.Logf("round %d: leader %d, pausing node %d", round, leader, first.ID)

		first.Pause()
		waitFor(t, 30*time.Second, fmt.Sprintf("node %d out of the ISR", first.ID), func() bool {
			v, err := view(c.Node(leader).Addr(), topic)
			return err == nil && !slices.Contains(v.parts[0].isr, first.ID) && v.parts[0].leader == leader
		})
		t.Logf("%v: node %d out of the ISR", since(), first.ID)
		p.waitAcks(t, 500, 30*time.Second)

		// min.insync.replicas=3 with two in-sync replicas: refused before
		// anything is written.
		// Short client timeouts: the stopped node may lead this topic
		// until its session expires, and requests to it hang.
		strictCl := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
			kgo.RequestTimeoutOverhead(time.Second), kgo.ProduceRequestTimeout(time.Second), kgo.MetadataMaxAge(500*time.Millisecond))
		waitFor(t, 30*time.Second, "NOT_ENOUGH_REPLICAS from "+strict, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := strictCl.ProduceSync(ctx, &kgo.Record{Topic: strict, Value: []byte("strict")}).FirstErr()
			if err == nil {
				t.Fatalf("acks=all write to %s acknowledged with node %d stopped", strict, first.ID)
			}
			return errors.Is(err, kerr.NotEnoughReplicas)
		})
		strictCl.Close()
		t.Logf("%v: NOT_ENOUGH_REPLICAS from %s", since(), strict)

		t.Logf("round %d: pausing node %d too", round, second.ID)
		second.Pause()
		pause(time.Second) // writes in flight before the pause may still complete
		before, failedBefore := p.acks(), total(p.failures())
		pause(8 * time.Second) // longer than the produce timeout
		if got := p.acks(); got != before {
			t.Fatalf("%d records acknowledged with only the leader running", got-before)
		}
		if got := total(p.failures()); got <= failedBefore {
			t.Fatalf("no write failed with only the leader running (failures: %v)", p.failures())
		}
		t.Logf("with two followers stopped: failures %v", p.failures())

		first.Resume()
		second.Resume()
		waitFor(t, 60*time.Second, "a full ISR again", func() bool {
			v, err := view(c.Node(leader).Addr(), topic)
			return err == nil && len(v.parts[0].isr) == 3
		})
		t.Logf("%v: full ISR again", since())
		p.waitAcks(t, 500, 30*time.Second)
	}
	p.stop()
	p.verify(t, c, 1, nil)
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestKillController: SIGKILL of the active controller gives another
// active controller within seconds; topic creation keeps working, and
// records produced meanwhile are all there. On 3 combined nodes and on 3
// controllers with 3 brokers.
func TestKillController(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) { killController(t, l.cfg) })
	}
}

func killController(t *testing.T, layout proctest.ClusterConfig) {
	rounds := 1
	if *longRun {
		rounds = 3
	}
	keys, values := dataset(t, 2000)
	c := startLayout(t, layout)
	cl := newClient(t, c)
	const topic = "ctl"
	createTopic(t, c, cl, topic, 3, map[string]string{"min.insync.replicas": "2"})
	p := startProducer(t, c, topic, keys, values, 1000)
	p.waitAcks(t, 500, 30*time.Second)
	adm := kadm.NewClient(cl)

	for round := range rounds {
		// The leader of the metadata quorum, as DescribeQuorum (which
		// brokers forward) tells; on combined nodes Metadata's
		// controller id names it too, while broker-only nodes name
		// themselves there, as Kafka's do.
		var ctl int32 = -1
		waitFor(t, 15*time.Second, "the active controller", func() bool {
			id, err := quorumLeader(c.Node(others(c)[0]).Addr())
			ctl = id
			return err == nil && id >= 0
		})
		if layout.Nodes > 0 {
			if v := mustView(t, c, "", others(c)...); v.controller != ctl {
				t.Fatalf("Metadata names controller %d, DescribeQuorum %d", v.controller, ctl)
			}
		}
		rest := others(c, ctl)
		killed := time.Now()
		c.Node(ctl).Kill()
		var next int32
		waitFor(t, 15*time.Second, "a new active controller", func() bool {
			id, err := quorumLeader(c.Node(rest[0]).Addr())
			next = id
			return err == nil && next >= 0 && next != ctl
		})
		t.Logf("round %d: node %d took over from node %d after %v", round, next, ctl, time.Since(killed).Round(10*time.Millisecond))

		// Two replicas: the killed node may already be fenced.
		name := fmt.Sprintf("after-kill-%d", round)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := adm.CreateTopic(ctx, 2, 2, nil, name)
		cancel()
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create topic after controller kill: %v", err)
		}
		t.Logf("round %d: topic %s created %v after the kill", round, name, time.Since(killed).Round(10*time.Millisecond))
		waitFor(t, 30*time.Second, "leaders of "+name, func() bool {
			v, err := view(c.Node(rest[0]).Addr(), name)
			return err == nil && len(v.parts) == 2 && v.parts[0].leader >= 0 && v.parts[1].leader >= 0
		})
		produceOne(t, cl, name)
		p.waitAcks(t, 500, 30*time.Second)

		c.Node(ctl).Restart()
		name = fmt.Sprintf("after-restart-%d", round)
		createTopic(t, c, cl, name, 1, nil)
		produceOne(t, cl, name)
		if !c.Node(ctl).Broker {
			continue // a controller-only node is in no ISR
		}
		waitFor(t, 60*time.Second, fmt.Sprintf("node %d back in every ISR of %s", ctl, topic), func() bool {
			v, err := view(c.Node(rest[0]).Addr(), topic)
			if err != nil {
				return false
			}
			for _, ps := range v.parts {
				if !slices.Contains(ps.isr, ctl) {
					return false
				}
			}
			return true
		})
	}
	p.stop()
	p.verify(t, c, 3, nil)
}

// produceOne writes a record to topic with acks=all and reads it back.
func produceOne(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := &kgo.Record{Topic: topic, Value: []byte("hello " + topic)}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// TestIsolatedLeader: the leader of a partition is cut off from the other
// nodes by TCP proxies (its broker listener as the followers reach it, and
// the controller links both ways), while clients still reach it. It cannot
// acknowledge acks=all writes; the others elect a new leader that takes
// the writes; once the links heal, the old leader truncates the records it
// appended alone and rejoins the ISR.
func TestIsolatedLeader(t *testing.T) {
	rounds := 1
	if *longRun {
		rounds = 3
	}
	keys, values := dataset(t, 2000)
	c := startCluster(t, true)
	cl := newClient(t, c)
	const topic = "cut"
	createTopic(t, c, cl, topic, 1, map[string]string{"min.insync.replicas": "2"})
	p := startProducer(t, c, topic, keys, values, 1000)
	p.waitAcks(t, 500, 30*time.Second)
	absent := map[string]bool{}

	for round := range rounds {
		leader := mustView(t, c, topic, others(c)...).parts[0].leader
		rest := others(c, leader)
		t.Logf("round %d: isolating node %d, leader of %s", round, leader, topic)
		c.Isolate(leader)

		// Written straight to the isolated leader: appended there, never
		// acknowledged.
		direct := wire.NewClient(c.Node(leader).Addr(), "isolated-writer", 16<<20)
		for i := range 3 {
			v := fmt.Sprintf("isolated-%d-%d", round, i)
			code, base := produceDirect(t, direct, topic, 0, -1, v)
			t.Logf("acks=all to the isolated leader: %v (base offset %d)", kerr.ErrorForCode(code), base)
			if code == 0 {
				t.Fatalf("the isolated leader acknowledged an acks=all write at offset %d", base)
			}
			absent[v] = true
		}
		direct.Close()

		waitFor(t, 30*time.Second, "a new leader among the others", func() bool {
			v, err := view(c.Node(rest[0]).Addr(), topic)
			return err == nil && v.parts[0].leader >= 0 && v.parts[0].leader != leader
		})
		p.waitAcks(t, 500, 30*time.Second)

		c.Heal(leader)
		waitFor(t, 60*time.Second, fmt.Sprintf("node %d back in the ISR", leader), func() bool {
			v, err := view(c.Node(rest[0]).Addr(), topic)
			return err == nil && slices.Contains(v.parts[0].isr, leader)
		})
		if !hasLine(c.Node(leader).Logs(), "truncating diverged follower", "topic="+topic) {
			t.Errorf("node %d did not truncate its stale tail after healing", leader)
		}
		p.waitAcks(t, 500, 30*time.Second)
	}
	p.stop()
	p.verify(t, c, 1, absent)
}

// produceDirect sends one record to a partition of topic over cl with
// acks (1 or -1) and a 3 s timeout and returns the partition's error code
// and base offset.
func produceDirect(t *testing.T, cl *wire.Client, topic string, partition int32, acks int16, value string) (int16, int64) {
	t.Helper()
	batch, err := record.Build(record.Spec{ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch,
		BaseSequence: record.NoSequence, BaseTimestamp: time.Now().UnixMilli()}, []record.Record{{Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = acks
	req.TimeoutMillis = 3000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	if err != nil {
		// No answer at all is no acknowledgement either.
		return kerr.RequestTimedOut.Code, -1
	}
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		t.Fatalf("malformed produce response")
	}
	sp := pr.Topics[0].Partitions[0]
	return sp.ErrorCode, sp.BaseOffset
}

// TestRestartLosingUnflushedTail: the leader of a partition is killed,
// loses the end of its log as a power failure loses what only the page
// cache held (Samsa, like Kafka, leaves flushing to the OS and relies on
// replication), and restarts at once, before its broker session expires.
// The restarted broker must not lead with what is left, nor make its
// followers truncate to it: every acknowledged record is read back.
func TestRestartLosingUnflushedTail(t *testing.T) {
	keys, values := dataset(t, 2000)
	// A session longer than the restart: the controller does not fence
	// the broker before it registers again.
	c := startCluster(t, false, "broker.session.timeout.ms=20000", "broker.heartbeat.interval.ms=500")
	const topic = "powerloss"
	createTopic(t, c, newClient(t, c), topic, 1, map[string]string{"min.insync.replicas": "2"})
	p := startProducer(t, c, topic, keys, values, 2000)
	p.waitAcks(t, 3000, 30*time.Second)

	leader := mustView(t, c, topic, others(c)...).parts[0].leader
	rest := others(c, leader)
	c.Node(leader).Kill()
	dir := filepath.Join(c.Node(leader).Dir, topic+"-0")
	segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(segs) == 0 {
		t.Fatalf("no segment in %s", dir)
	}
	sort.Strings(segs)
	active := segs[len(segs)-1]
	st, err := os.Stat(active)
	if err != nil {
		t.Fatal(err)
	}
	cut := min(st.Size(), 256<<10)
	if err := os.Truncate(active, st.Size()-cut); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d, leader of %s, killed and %d bytes of %s lost", leader, topic, cut, filepath.Base(active))
	c.Node(leader).Restart()

	waitFor(t, 60*time.Second, fmt.Sprintf("node %d back in the ISR", leader), func() bool {
		v, err := view(c.Node(rest[0]).Addr(), topic)
		return err == nil && len(v.parts[0].isr) == 3
	})
	p.waitAcks(t, 1000, 30*time.Second)
	p.stop()
	p.verify(t, c, 1, nil)
	noStaleMetadata(t, p)
}
