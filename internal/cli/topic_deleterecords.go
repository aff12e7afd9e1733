package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteRecordsPlan is kafka-delete-records' --offset-json-file:
// {"partitions":[{"topic":"t","partition":0,"offset":42}],"version":1}.
type deleteRecordsPlan struct {
	Version    *int `json:"version"`
	Partitions *[]struct {
		Topic     *string `json:"topic"`
		Partition *int32  `json:"partition"`
		Offset    *int64  `json:"offset"`
	} `json:"partitions"`
}

// recordsToDelete is one partition and the offset below which its records
// go (-1: the high watermark).
type recordsToDelete struct {
	topic     string
	partition int32
	offset    int64
}

// parseDeleteRecordsJSON reads kafka-delete-records' offset JSON: version 1
// (the default when absent), every field of every partition present, no
// partition twice (Kafka: "Offset json file contains duplicate topic
// partitions").
func parseDeleteRecordsJSON(data []byte) ([]recordsToDelete, error) {
	var plan deleteRecordsPlan
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&plan); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if plan.Version != nil && *plan.Version != 1 {
		return nil, fmt.Errorf("not supported version field value %d", *plan.Version)
	}
	if plan.Partitions == nil {
		return nil, errors.New("missing partitions field")
	}
	var out []recordsToDelete
	seen := map[recordsToDelete]int{}
	var dups []string
	for i, p := range *plan.Partitions {
		if p.Topic == nil || p.Partition == nil || p.Offset == nil {
			return nil, fmt.Errorf("partitions[%d]: topic, partition and offset are required", i)
		}
		key := recordsToDelete{topic: *p.Topic, partition: *p.Partition}
		if seen[key]++; seen[key] == 2 {
			dups = append(dups, fmt.Sprintf("%s-%d", key.topic, key.partition))
		}
		out = append(out, recordsToDelete{*p.Topic, *p.Partition, *p.Offset})
	}
	if len(dups) > 0 {
		return nil, fmt.Errorf("offset json file contains duplicate topic partitions: %s", strings.Join(dups, ","))
	}
	return out, nil
}

func newTopicDeleteRecordsCommand(f *topicFlags) *cobra.Command {
	var (
		jsonFile   string
		topic      string
		partitions []int32
		offset     int64
	)
	cmd := &cobra.Command{
		Use:   "delete-records {--offset-json-file FILE | --topic T --partition P [--offset O]}",
		Short: "Delete the records of partitions below an offset (like kafka-delete-records)",
		Long: `Delete the records of partitions below an offset (DeleteRecords, KIP-107),
as kafka-delete-records does: each partition's log start offset, its "low
watermark", moves up to the offset, and the records below it can no longer
be read (whole segments below it are removed). It is the operator's way
past records that no reader should see, such as damaged data.

The partitions and offsets come from kafka-delete-records' JSON file,

  {"partitions":[{"topic":"t","partition":0,"offset":42}],"version":1}

or from --topic with one or more --partition and --offset. Offset -1 (the
default of --offset) means the partition's high watermark: every record
written so far is deleted.

For each partition it prints its new low watermark or the error, as
kafka-delete-records does, and exits non-zero when any failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var reqs []recordsToDelete
			switch {
			case jsonFile != "" && (topic != "" || len(partitions) > 0 || cmd.Flags().Changed("offset")):
				return errors.New("give either --offset-json-file or --topic/--partition/--offset, not both")
			case jsonFile != "":
				data, err := os.ReadFile(jsonFile)
				if err != nil {
					return err
				}
				if reqs, err = parseDeleteRecordsJSON(data); err != nil {
					return fmt.Errorf("%s: %w", jsonFile, err)
				}
			case topic == "" || len(partitions) == 0:
				return errors.New("give --offset-json-file FILE, or --topic T and --partition P (and --offset O, -1 for the high watermark)")
			default:
				if offset < -1 {
					return fmt.Errorf("--offset %d: want an offset >= 0, or -1 for the high watermark", offset)
				}
				seen := map[int32]bool{}
				for _, p := range partitions {
					if seen[p] {
						return fmt.Errorf("--partition %d given twice", p)
					}
					seen[p] = true
					reqs = append(reqs, recordsToDelete{topic, p, offset})
				}
			}
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			offs := make(kadm.Offsets)
			for _, r := range reqs {
				offs.Add(kadm.Offset{Topic: r.topic, Partition: r.partition, At: r.offset})
			}
			resps, reqErr := adm.DeleteRecords(ctx, offs)
			// A piece of the request that failed as a whole (an unknown
			// topic has no leader to send it to) fails its partitions.
			shardErr := map[recordsToDelete]error{}
			var se *kadm.ShardErrors
			if errors.As(reqErr, &se) {
				for _, e := range se.Errs {
					if req, ok := e.Req.(*kmsg.DeleteRecordsRequest); ok {
						for _, t := range req.Topics {
							for _, p := range t.Partitions {
								shardErr[recordsToDelete{topic: t.Topic, partition: p.Partition}] = e.Err
							}
						}
					}
				}
			}
			sort.Slice(reqs, func(i, j int) bool {
				if reqs[i].topic != reqs[j].topic {
					return reqs[i].topic < reqs[j].topic
				}
				return reqs[i].partition < reqs[j].partition
			})
			failed := 0
			out := cmd.OutOrStdout()
			for _, r := range reqs {
				resp, ok := resps.Lookup(r.topic, r.partition)
				switch {
				case ok && resp.Err == nil:
					fmt.Fprintf(out, "partition: %s-%d\tlow_watermark: %d\n", r.topic, r.partition, resp.LowWatermark)
					continue
				case ok:
					fmt.Fprintf(out, "partition: %s-%d\terror: %v\n", r.topic, r.partition, resp.Err)
				case shardErr[recordsToDelete{topic: r.topic, partition: r.partition}] != nil:
					fmt.Fprintf(out, "partition: %s-%d\terror: %v\n", r.topic, r.partition, shardErr[recordsToDelete{topic: r.topic, partition: r.partition}])
				case reqErr != nil:
					fmt.Fprintf(out, "partition: %s-%d\terror: %v\n", r.topic, r.partition, reqErr)
				default:
					fmt.Fprintf(out, "partition: %s-%d\terror: not in the response\n", r.topic, r.partition)
				}
				failed++
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d partitions failed", failed, len(reqs))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&jsonFile, "offset-json-file", "", "kafka-delete-records' JSON `file` of partitions and offsets")
	fl.StringVarP(&topic, "topic", "t", "", "the topic whose records to delete")
	fl.Int32SliceVarP(&partitions, "partition", "p", nil, "a partition of --topic; may be repeated or comma-separated")
	fl.Int64VarP(&offset, "offset", "o", -1, "delete the records below this offset; -1: below the high watermark, all of them")
	return cmd
}
