// Package jsonkey finds the value of a top-level field of a JSON object
// quickly, for samsa produce --key-field. It validates the whole text as
// encoding/json would (RFC 8259 grammar, nesting up to 10,000 levels) in one
// pass without allocating, and decodes only the field it returns: several
// times faster than decoding the object into a map.
package jsonkey

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Errors of Field.
var (
	// ErrNotObject is returned for valid JSON that is not an object.
	ErrNotObject = errors.New("jsonkey: not a JSON object")
	// ErrSyntax is returned (wrapped, with encoding/json's description)
	// for text that is not JSON.
	ErrSyntax = errors.New("jsonkey: invalid JSON")
)

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// Field returns the value of the top-level field of the JSON object in
// line: a string's contents, or the JSON text of another value as it is in
// line. ok is false when the field is missing or null. When the field
// appears more than once the last one counts, as with encoding/json. A
// string without escapes is returned as a slice of line; escapes are
// decoded, and invalid UTF-8 becomes U+FFFD as encoding/json does. Errors:
// ErrSyntax for text that is not JSON, ErrNotObject for JSON that is not an
// object.
func Field(line []byte, field string) (value []byte, ok bool, err error) {
	s := scanner{b: line, field: field}
	s.space()
	isObject := s.peek() == '{'
	if !s.value(0) || (s.space() && s.i != len(s.b)) {
		return nil, false, s.syntaxError()
	}
	if !isObject {
		return nil, false, ErrNotObject
	}
	raw := s.found
	if raw == nil || string(raw) == "null" {
		return nil, false, nil
	}
	if raw[0] != '"' {
		return raw, true, nil
	}
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner, true, nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	return []byte(str), true, nil
}

// scanner validates JSON text and keeps the value of the top-level field.
type scanner struct {
	b     []byte
	i     int
	field string
	found []byte // text of the last top-level value named field
}

// syntaxError describes the error at s.i, with encoding/json's words when
// it agrees that the text is not JSON.
func (s *scanner) syntaxError() error {
	var v any
	if err := json.Unmarshal(s.b, &v); err != nil {
		return fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	return fmt.Errorf("%w: at byte %d", ErrSyntax, s.i)
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// space skips white space; it returns true so that it can be chained.
func (s *scanner) space() bool {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return true
		}
	}
	return true
}

// value checks one value at s.i, nested depth levels deep.
func (s *scanner) value(depth int) bool {
	switch c := s.peek(); {
	case c == '"':
		return s.str()
	case c == '{':
		return depth < maxDepth && s.object(depth+1)
	case c == '[':
		return depth < maxDepth && s.array(depth+1)
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *scanner) object(depth int) bool {
	s.i++ // '{'
	s.space()
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		start := s.i
		if !s.str() {
			return false
		}
		name := s.b[start:s.i]
		s.space()
		if s.peek() != ':' {
			return false
		}
		s.i++
		s.space()
		vstart := s.i
		if !s.value(depth) {
			return false
		}
		if depth == 1 && stringEquals(name, s.field) {
			s.found = s.b[vstart:s.i]
		}
		s.space()
		switch s.peek() {
		case ',':
			s.i++
			s.space()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *scanner) array(depth int) bool {
	s.i++ // '['
	s.space()
	if s.peek() == ']' {
		s.i++
		return true
	}
	for {
		if !s.value(depth) {
			return false
		}
		s.space()
		switch s.peek() {
		case ',':
			s.i++
			s.space()
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// str checks a string literal starting at its opening quote.
func (s *scanner) str() bool {
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !isHex(h) {
						return false
					}
				}
				s.i += 6
			default:
				return false
			}
		default:
			s.i++
		}
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return false
	}
	if s.peek() == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits skips [0-9]+ and reports whether there was one.
func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

func (s *scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

// stringEquals reports whether the JSON string literal lit (quotes
// included, already checked) decodes to s.
func stringEquals(lit []byte, s string) bool {
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner) == s
	}
	var dec string
	return json.Unmarshal(lit, &dec) == nil && dec == s
}
