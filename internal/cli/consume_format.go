package cli

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// formatHelp documents --format; it is part of samsa consume --help.
const formatHelp = `Output format (--format), like kcat's -f: the template is written once per
record, so end it with \n. Verbs:
  %v, %s  value          %V, %S  value length in bytes (-1: null value)
  %k      key            %K      key length in bytes (-1: null key)
  %t      topic          %p      partition
  %o      offset         %T      timestamp, milliseconds since the epoch
  %h      headers, as key=value separated by commas
  %%      a percent sign
Escapes: \n newline, \t tab, \r carriage return, \0 NUL byte, \\ backslash.
A null key or value prints as nothing. The default (or an empty template)
is %v\n.
Example: --format '%p\t%o\t%k\t%v\n'`

// defaultFormat prints each value on a line of its own.
const defaultFormat = `%v\n`

// recordFormat is a compiled --format template: literal text and verbs.
type recordFormat []formatPart

type formatPart struct {
	verb byte   // 0 for literal text
	text []byte // the literal text
}

// parseFormat compiles a --format template (see formatHelp). It rejects
// an unknown verb or escape and a trailing lone % or \.
func parseFormat(s string) (recordFormat, error) {
	var f recordFormat
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			f = append(f, formatPart{text: lit})
			lit = nil
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '%', '\\':
			if i+1 == len(s) {
				return nil, fmt.Errorf("--format %q: lone %c at the end", s, c)
			}
			i++
			n := s[i]
			if c == '\\' {
				switch n {
				case 'n':
					lit = append(lit, '\n')
				case 't':
					lit = append(lit, '\t')
				case 'r':
					lit = append(lit, '\r')
				case '0':
					lit = append(lit, 0)
				case '\\':
					lit = append(lit, '\\')
				default:
					return nil, fmt.Errorf("--format %q: unknown escape \\%c", s, n)
				}
				continue
			}
			switch n {
			case '%':
				lit = append(lit, '%')
			case 'v', 's', 'V', 'S', 'k', 'K', 't', 'p', 'o', 'T', 'h':
				flush()
				f = append(f, formatPart{verb: n})
			default:
				return nil, fmt.Errorf("--format %q: unknown verb %%%c", s, n)
			}
		default:
			lit = append(lit, c)
		}
	}
	flush()
	return f, nil
}

// appendRecord appends r formatted by f to b.
func (f recordFormat) appendRecord(b []byte, r *kgo.Record) []byte {
	for _, p := range f {
		switch p.verb {
		case 0:
			b = append(b, p.text...)
		case 'v', 's':
			b = append(b, r.Value...)
		case 'V', 'S':
			b = appendLen(b, r.Value)
		case 'k':
			b = append(b, r.Key...)
		case 'K':
			b = appendLen(b, r.Key)
		case 't':
			b = append(b, r.Topic...)
		case 'p':
			b = strconv.AppendInt(b, int64(r.Partition), 10)
		case 'o':
			b = strconv.AppendInt(b, r.Offset, 10)
		case 'T':
			b = strconv.AppendInt(b, r.Timestamp.UnixMilli(), 10)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, h.Key...)
				b = append(b, '=')
				b = append(b, h.Value...)
			}
		}
	}
	return b
}

// appendLen appends len(v), or -1 for a null v.
func appendLen(b, v []byte) []byte {
	if v == nil {
		return append(b, "-1"...)
	}
	return strconv.AppendInt(b, int64(len(v)), 10)
}
