package broker

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Each handler file heads its API's registration with the versions it
// serves and what each of them adds, as franz-go's kfake does:
//
//	// Produce: v3-11
//	//
//	// Version notes:
//	//   - v3: ...
//	//   - v4: ...
var (
	versionsHeader = regexp.MustCompile(`^// (\w+): v(\d+)(?:-(\d+))?$`)
	versionNote    = regexp.MustCompile(`^//   - v(\d+): `)
)

// TestVersionNotes: every registered API has one header, in the file that
// registers it, naming the registered version range, with one note per
// version of that range in order. A version range changed without its
// notes fails here.
func TestVersionNotes(t *testing.T) {
	byName := map[string]kmsg.Key{}
	for _, a := range apis {
		byName[a.key.Name()] = a.key
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[kmsg.Key]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(src), "\n")
		for i, l := range lines {
			m := versionsHeader.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			where := f + ":" + strconv.Itoa(i+1)
			key, ok := byName[m[1]]
			if !ok {
				t.Errorf("%s: header of %s, which is not registered", where, m[1])
				continue
			}
			if prev, dup := seen[key]; dup {
				t.Errorf("%s: second header of %s (first at %s)", where, m[1], prev)
			}
			seen[key] = where
			if !strings.Contains(string(src), "(kmsg."+m[1]+",") {
				t.Errorf("%s: header of %s in a file that does not register it", where, m[1])
			}
			lo, _ := strconv.Atoi(m[2])
			hi := lo
			if m[3] != "" {
				hi, _ = strconv.Atoi(m[3])
			}
			a := apis[key]
			if int16(lo) != a.min || int16(hi) != a.max {
				t.Errorf("%s: %s notes versions v%d-%d, registered v%d-%d", where, m[1], lo, hi, a.min, a.max)
			}
			var got []int
			for _, n := range lines[i+1:] {
				if !strings.HasPrefix(n, "//") {
					break
				}
				if nm := versionNote.FindStringSubmatch(n); nm != nil {
					v, _ := strconv.Atoi(nm[1])
					got = append(got, v)
				}
			}
			var want []int
			for v := a.min; v <= a.max; v++ {
				want = append(want, int(v))
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: %s has notes for versions %v, want one for each of %v", where, m[1], got, want)
			}
		}
	}
	for _, a := range apis {
		if _, ok := seen[a.key]; !ok {
			t.Errorf("%s (v%d-%d) has no version notes header", a.key.Name(), a.min, a.max)
		}
	}
}
