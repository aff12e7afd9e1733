package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	ctx := context.Background()
	cl, _ := kgo.NewClient(kgo.SeedBrokers(os.Args[1]), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(3))
	adm := kadm.NewClient(cl)
	seg, pol := "200", "compact"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &seg, "cleanup.policy": &pol}, "c1"); err != nil {
		panic(err)
	}
	n := 0
	var recs []*kgo.Record
	for i := 0; i < 5; i++ {
		for j := 0; j < 30; j++ {
			recs = append(recs, &kgo.Record{Topic: "c1", Key: fmt.Appendf(nil, "%04d", n), Value: fmt.Appendf(nil, "%04d", n)})
			n++
			for k := 0; k < i; k++ {
				recs = append(recs, &kgo.Record{Topic: "c1", Key: []byte("dup_"), Value: fmt.Appendf(nil, "%04d", n)})
			}
		}
	}
	for i := 0; i < len(recs); i += 3 {
		end := min(i+3, len(recs))
		if err := cl.ProduceSync(ctx, recs[i:end]...).FirstErr(); err != nil {
			panic(err)
		}
	}
	fmt.Println("produced", len(recs))
	time.Sleep(30 * time.Second) // wait for the cleaner (experiment only)
	c2, _ := kgo.NewClient(kgo.SeedBrokers(os.Args[1]), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"c1": {0: kgo.NewOffset().AtStart()}}), kgo.FetchMaxBytes(200), kgo.FetchMaxPartitionBytes(200))
	keys := map[string]int{}
	last := int64(-1)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := c2.PollFetches(pctx)
		cancel()
		if pctx.Err() != nil && fs.NumRecords() == 0 {
			fmt.Println("stuck after offset", last, "keys", len(keys))
			return
		}
		fs.EachRecord(func(r *kgo.Record) { keys[string(r.Key)]++; last = r.Offset })
		if len(keys) == 151 {
			fmt.Println("all keys, last offset", last)
			return
		}
	}
}
