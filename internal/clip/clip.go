// Package clip shortens strings a client chose (member, instance, client,
// group and transactional ids, rack ids, leave reasons) for log lines: a
// client may send ids of up to 32,767 bytes (a Kafka STRING) or more
// (COMPACT_STRING), and a coordinator logging a 1 MiB member id on each
// heartbeat writes a 1 MiB line each time.
package clip

import (
	"strconv"
	"unicode/utf8"
)

// Max is the most bytes of a client's string a log line carries.
const Max = 256

// String returns s when it is at most Max bytes; else its first Max bytes
// or fewer (cut at a UTF-8 boundary) followed by "...(+N bytes)", N the
// bytes left out. Safe for concurrent use.
func String(s string) string {
	if len(s) <= Max {
		return s
	}
	n := Max
	for n > Max-utf8.UTFMax && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "...(+" + strconv.Itoa(len(s)-n) + " bytes)"
}
