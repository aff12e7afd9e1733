package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// kcatClient drives the kcat binary (librdkafka) as a process.
type kcatClient struct {
	bootstrap string
}

func newKcat(bootstrap string) (client, error) {
	if _, err := exec.LookPath("kcat"); err != nil {
		return nil, fmt.Errorf("kcat not installed: %w", err)
	}
	return &kcatClient{bootstrap: bootstrap}, nil
}

func (c *kcatClient) close() {}

func (c *kcatClient) run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	pre := []string{"-b", c.bootstrap}
	for k, v := range librdkafkaSecurity() {
		pre = append(pre, "-X", k+"="+v)
	}
	args = append(pre, args...)
	cmd := exec.CommandContext(ctx, "kcat", args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if stderr.Len() > 0 {
		logf("kcat %s: stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	if err != nil {
		return out, fmt.Errorf("kcat %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

var kcatVersionRE = regexp.MustCompile(`Version (\S+) .*librdkafka (\S+)`)

func (c *kcatClient) version() string {
	out, _ := exec.Command("kcat", "-V").CombinedOutput()
	if m := kcatVersionRE.FindSubmatch(out); m != nil {
		return fmt.Sprintf("%s (librdkafka %s)", m[1], m[2])
	}
	return "unknown"
}

func (c *kcatClient) metadata(ctx context.Context, topic string) (int, []int32, error) {
	out, err := c.run(ctx, nil, "-L", "-J") // all topics: a named one may be auto-created
	if err != nil {
		return 0, nil, err
	}
	var md struct {
		Brokers []struct{ ID int32 }
		Topics  []struct {
			Topic      string
			Error      string `json:"error"`
			Partitions []struct {
				Partition int32
				Leader    int32
			}
		}
	}
	if err := json.Unmarshal(out, &md); err != nil {
		return 0, nil, fmt.Errorf("kcat -L -J output: %v: %s", err, out)
	}
	m := map[int32]int32{}
	for _, t := range md.Topics {
		if t.Topic != topic || t.Error != "" {
			continue
		}
		for _, p := range t.Partitions {
			m[p.Partition] = p.Leader
		}
	}
	return len(md.Brokers), sortedPartitions(m), nil
}

func (c *kcatClient) createTopic(ctx context.Context, topic string, partitions int32) error {
	return na{"kcat has no admin API"}
}

func (c *kcatClient) produce(ctx context.Context, topic, codec string, recs []record, idempotent bool) error {
	var in bytes.Buffer
	for _, r := range recs {
		if r.Partition != 0 {
			return fmt.Errorf("kcat runner produces to partition 0 only")
		}
		in.Write(r.Key)
		in.WriteByte('\t')
		in.Write(r.Value)
		in.WriteByte('\n')
	}
	args := []string{"-P", "-t", topic, "-p", "0", "-K", "\t", "-z", codec, "-X", "linger.ms=5", "-X", "acks=all"}
	if idempotent {
		args = append(args, "-X", "enable.idempotence=true")
	}
	_, err := c.run(ctx, in.Bytes(), args...)
	return err
}

func (c *kcatClient) consume(ctx context.Context, topic string, partition int32, n int, readCommitted bool) ([]record, error) {
	iso := "read_uncommitted"
	if readCommitted {
		iso = "read_committed"
	}
	out, err := c.run(ctx, nil, "-C", "-t", topic, "-p", strconv.Itoa(int(partition)), "-o", "beginning",
		"-c", strconv.Itoa(n), "-e", "-q", "-f", "%o\t%k\t%s\n", "-X", "isolation.level="+iso)
	if err != nil {
		return nil, err
	}
	var recs []record
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			return recs, fmt.Errorf("kcat output line %q", line)
		}
		o, _ := strconv.ParseInt(f[0], 10, 64)
		recs = append(recs, record{Offset: o, Key: []byte(f[1]), Value: []byte(f[2]), Partition: partition})
	}
	return recs, nil
}

var kcatOffsetRE = regexp.MustCompile(`\[(\d+)\]\s+offset\s+(-?\d+)`)

func (c *kcatClient) offsetForTime(ctx context.Context, topic string, partition int32, ts int64) (int64, error) {
	out, err := c.run(ctx, nil, "-Q", "-t", fmt.Sprintf("%s:%d:%d", topic, partition, ts))
	if err != nil {
		return 0, err
	}
	m := kcatOffsetRE.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("kcat -Q output %q", out)
	}
	return strconv.ParseInt(string(m[2]), 10, 64)
}

func (c *kcatClient) describeConfigs(ctx context.Context, topic string) (map[string]string, error) {
	return nil, na{"kcat has no admin API"}
}

func (c *kcatClient) alterConfig(ctx context.Context, topic, key, value string) error {
	return na{"kcat has no admin API"}
}

func (c *kcatClient) deleteTopic(ctx context.Context, topic string) error {
	return na{"kcat has no admin API"}
}

func (c *kcatClient) newMember(ctx context.Context, topic, group string) (member, error) {
	return nil, na{"kcat's -G consumer cannot be driven step by step (commit, leave); librdkafka's group protocol is covered by confluent-kafka-python and confluent-kafka-go"}
}

func (c *kcatClient) newTxnProducer(ctx context.Context, topic, txnID string) (txnProducer, error) {
	return nil, na{"kcat wraps a whole run in one transaction and cannot abort; librdkafka's transactions are covered by confluent-kafka-python and confluent-kafka-go"}
}

// consumeFrom runs kcat -C -e, which exits at the end of the partition,
// and hands fn the records it printed (all of them when ctx ended first:
// the process is killed, its output kept). -Z prints a null value as NULL.
func (c *kcatClient) consumeFrom(ctx context.Context, topic string, partition int32, fn func(record) (bool, error)) error {
	out, runErr := c.run(ctx, nil, "-C", "-t", topic, "-p", strconv.Itoa(int(partition)), "-o", "beginning",
		"-e", "-q", "-Z", "-f", "%o\t%k\t%s\n")
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			return fmt.Errorf("kcat output line %q", line)
		}
		o, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return fmt.Errorf("kcat output line %q", line)
		}
		r := record{Offset: o, Key: []byte(f[1]), Partition: partition}
		if f[2] != "NULL" {
			r.Value = []byte(f[2])
		}
		if stop, err := fn(r); stop || err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	return nil // the end of the partition (-e) before fn stopped
}
