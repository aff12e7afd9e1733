package metrics

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// DiskIO serves the bytes the process read from and wrote to storage
// devices, from /proc/self/io (read_bytes, write_bytes), under Kafka's
// names (KafkaServer linux-disk-read-bytes, linux-disk-write-bytes). On
// systems without /proc/self/io it serves nothing.
func DiskIO() prometheus.Collector { return diskIO{} }

type diskIO struct{}

var (
	diskReadDesc  = prometheus.NewDesc("kafka_server_kafkaserver_linux_disk_read_bytes", "Bytes the process read from storage devices (/proc/self/io read_bytes; Kafka's linux-disk-read-bytes).", nil, nil)
	diskWriteDesc = prometheus.NewDesc("kafka_server_kafkaserver_linux_disk_write_bytes", "Bytes the process wrote to storage devices (/proc/self/io write_bytes; Kafka's linux-disk-write-bytes).", nil, nil)
)

func (diskIO) Describe(ch chan<- *prometheus.Desc) {
	ch <- diskReadDesc
	ch <- diskWriteDesc
}

func (diskIO) Collect(ch chan<- prometheus.Metric) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return
	}
	read, write, ok := parseProcIO(b)
	if !ok {
		return
	}
	// Kafka exports them as gauges of a growing total; so does Strimzi.
	ch <- prometheus.MustNewConstMetric(diskReadDesc, prometheus.GaugeValue, float64(read))
	ch <- prometheus.MustNewConstMetric(diskWriteDesc, prometheus.GaugeValue, float64(write))
}

// parseProcIO reads read_bytes and write_bytes from /proc/<pid>/io.
func parseProcIO(b []byte) (read, write int64, ok bool) {
	var seen int
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, found := bytes.Cut(sc.Bytes(), []byte(":"))
		if !found {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			continue
		}
		switch string(k) {
		case "read_bytes":
			read = n
			seen++
		case "write_bytes":
			write = n
			seen++
		}
	}
	return read, write, seen == 2
}
