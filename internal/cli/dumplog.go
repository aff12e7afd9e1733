package cli

import (
	"bufio"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/samsahq/samsa/internal/cli/dumplog"
)

func init() { clientCommands = append(clientCommands, newDumpLogCommand) }

func newDumpLogCommand() *cobra.Command {
	var opts dumplog.Options
	cmd := &cobra.Command{
		Use:   "dump-log FILE...",
		Short: "Decode segment files (.log, .index, .timeindex, .snapshot, .txnindex), like kafka-dump-log",
		Long: `Decode the files of a partition directory, as kafka-dump-log does.

FILE.log    one line per record batch, with its position and size in the
            file, offsets, record count, CRC-32C (and whether it matches),
            compression codec, producer ID, epoch and sequences,
            transactional and control flags, partition leader epoch and
            timestamps. A torn batch at the end is reported as invalid
            bytes. With --print-records, each record follows its batch on
            a line starting with "|": offset, timestamp, key and value
            sizes, sequence, headers, key and value (as text; quoted when
            not printable UTF-8; null for null), or the type of a control
            record (COMMIT or ABORT with the coordinator epoch).
FILE.index  one line per entry: absolute offset and position. When the
            .log beside it exists, each entry is checked: the batch at
            that position must end at that offset.
FILE.timeindex
            one line per entry: timestamp and absolute offset. When the
            .log beside it exists, each timestamp is checked against the
            largest batch max timestamp up to the batch holding the offset.
FILE.snapshot
            producer state below that offset: one line per producer id with
            its epoch, coordinator epoch, open transaction's first offset,
            and its last batch's sequences, offset and timestamp.
FILE.txnindex
            one line per aborted transaction whose ABORT marker is in the
            segment: producer id, first and last offsets, last stable
            offset.
The base offset comes from the file name (00000000000000000042.log).
The command exits non-zero when a file cannot be read or shows problems
(bad CRC, torn or corrupt batch, index mismatch).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := bufio.NewWriter(cmd.OutOrStdout())
			var errs []error
			for _, name := range args {
				if err := dumplog.File(w, name, opts); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
				}
			}
			if err := w.Flush(); err != nil {
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVarP(&opts.PrintRecords, "print-records", "r", false, "list the records of each batch (kafka-dump-log --print-data-log)")
	cmd.Flags().IntVar(&opts.MaxDecompressedBytes, "max-decompressed-bytes", 0, "largest decompressed batch to decode with --print-records (0: 128 MiB)")
	return cmd
}
