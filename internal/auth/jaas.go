package auth

import (
	"errors"
	"fmt"
	"strings"
)

// ParseJAAS parses the options of a sasl.jaas.config value, Kafka's
// one-entry JAAS form: a login module class, a control flag, then
// name=value options ending with ';'; values may be double-quoted with
// \" and \\ escapes. Only the options are returned.
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required
//	    username="admin" password="admin-secret" user_alice="alice-secret";
func ParseJAAS(v string) (map[string]string, error) {
	s := strings.TrimSpace(v)
	fields := 0
	for fields < 2 {
		i := strings.IndexAny(s, " \t\r\n")
		if i < 0 {
			return nil, errors.New("jaas config: expected a login module and a control flag")
		}
		s = strings.TrimLeft(s[i:], " \t\r\n")
		fields++
	}
	opts := map[string]string{}
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return nil, errors.New("jaas config: missing ';'")
		}
		if s[0] == ';' {
			if rest := strings.TrimSpace(s[1:]); rest != "" {
				return nil, fmt.Errorf("jaas config: text after ';': %q", rest)
			}
			return opts, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("jaas config: expected name=value at %q", s)
		}
		name := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val strings.Builder
		if strings.HasPrefix(s, `"`) {
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("jaas config: unterminated quote in option %s", name)
			}
			s = s[i+1:]
		} else {
			i := strings.IndexAny(s, " \t\r\n;")
			if i < 0 {
				i = len(s)
			}
			val.WriteString(s[:i])
			s = s[i:]
		}
		opts[name] = val.String()
	}
}

// PlainUsers are the user_NAME="password" options of a PLAIN JAAS config
// (Kafka's PlainServerCallbackHandler).
func PlainUsers(opts map[string]string) map[string]string {
	users := map[string]string{}
	for k, v := range opts {
		if name, ok := strings.CutPrefix(k, "user_"); ok && name != "" {
			users[name] = v
		}
	}
	return users
}
