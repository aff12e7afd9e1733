package chaos

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/samsahq/samsa/internal/chaos/check"
	"github.com/samsahq/samsa/internal/proctest"
)

// rdkafkaSender is a librdkafka producer (confluent-kafka through
// /usr/bin/python3), idempotent with acks=all: it reads "partition value"
// lines and answers each, once delivered or failed, with "ok OFFSET" or
// "err MESSAGE". A fatal error (the idempotent producer's state lost)
// replaces the producer, as an application would.
const rdkafkaSender = `
import sys
import confluent_kafka as ck

conf = {
    'bootstrap.servers': sys.argv[1],
    'enable.idempotence': True,
    'acks': 'all',
    'linger.ms': 0,
    'message.timeout.ms': 10000,
    'request.timeout.ms': 5000,
    'topic.metadata.refresh.interval.ms': 1000,
}
topic = sys.argv[2]
p = ck.Producer(conf)
for line in sys.stdin:
    part, val = line.split()
    res = {}
    def cb(err, msg, res=res):
        res['err'] = err
        res['off'] = msg.offset()
    try:
        p.produce(topic, value=val.encode(), partition=int(part), on_delivery=cb)
        while 'err' not in res:
            p.poll(0.1)
    except Exception as e:
        res['err'] = e
    err = res['err']
    if err is None:
        print('ok', res['off'], flush=True)
    else:
        print('err', str(err).replace('\n', ' '), flush=True)
        if isinstance(err, ck.KafkaError) and err.fatal():
            p = ck.Producer(conf)
`

// haveRdkafka reports whether /usr/bin/python3 has confluent_kafka.
func haveRdkafka() bool {
	return exec.Command("/usr/bin/python3", "-c", "import confluent_kafka").Run() == nil
}

// rdkafkaSend runs the librdkafka producer as process proc until ctx
// ends, sending one unique value at a time to a random partition. Its
// failures are recorded as unknown (info): librdkafka does not say
// whether a timed-out record was written.
func rdkafkaSend(ctx context.Context, t *testing.T, rec *check.Recorder, proc int, c *proctest.Cluster, values *atomic.Int64, seed uint64, out string) {
	script := filepath.Join(t.TempDir(), "sender.py")
	if err := os.WriteFile(script, []byte(rdkafkaSender), 0o644); err != nil {
		t.Error(err)
		return
	}
	logf, err := os.Create(filepath.Join(out, "librdkafka.log"))
	if err != nil {
		t.Error(err)
		return
	}
	defer logf.Close()
	cmd := exec.Command("/usr/bin/python3", script, strings.Join(c.Addrs(), ","), topic)
	cmd.Stderr = logf
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Error(err)
		return
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Error(err)
		return
	}
	if err := cmd.Start(); err != nil {
		t.Error(err)
		return
	}
	defer func() {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	lines := bufio.NewScanner(outp)
	rnd := rand.New(rand.NewPCG(seed, 4))
	for ctx.Err() == nil {
		p := rnd.Int32N(partitions)
		v := values.Add(1)
		mop := check.Mop{F: check.FSend, Partition: p, Value: v, Offset: -1}
		rec.Record(check.Op{Type: check.Invoke, Process: proc, F: check.FSend, Mops: []check.Mop{mop}})
		done := check.Op{Type: check.Info, Process: proc, F: check.FSend, Mops: []check.Mop{mop}}
		if _, err := fmt.Fprintf(in, "%d %d\n", p, v); err != nil {
			done.Error = err.Error()
			rec.Record(done)
			return
		}
		if !lines.Scan() {
			done.Error = fmt.Sprintf("librdkafka sender ended: %v", lines.Err())
			rec.Record(done)
			return
		}
		kind, rest, _ := strings.Cut(lines.Text(), " ")
		if kind == "ok" {
			if off, err := strconv.ParseInt(rest, 10, 64); err == nil {
				done.Type = check.OK
				done.Mops[0].Offset = off
			}
		} else {
			done.Error = rest
		}
		rec.Record(done)
	}
}
