package config

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// ReadPropertiesFile reads a Java-style .properties file: key=value or
// key: value lines, '#' and '!' comments, trailing '\' continuing a line.
// Escapes other than line continuation are kept literally.
func ReadPropertiesFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props, err := ReadProperties(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return props, nil
}

// ReadProperties parses properties from r; see ReadPropertiesFile.
func ReadProperties(r io.Reader) (map[string]string, error) {
	props := make(map[string]string)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var pending string
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if pending == "" && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) {
			pending += strings.TrimSuffix(line, `\`)
			continue
		}
		line = pending + line
		pending = ""
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			return nil, fmt.Errorf("line %d: no '=' in %q", lineNo, line)
		}
		key := strings.TrimSpace(line[:i])
		props[key] = strings.TrimSpace(line[i+1:])
	}
	return props, sc.Err()
}
