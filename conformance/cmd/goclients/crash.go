package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// crashMember is the hidden scenario of the child runner that
// scenarioCrash starts and kills: a member of the scenario's group that
// polls, prints `GOT VALUE` for each record and then commits, until it
// is killed. Printing before committing means that every record the
// child committed was printed (one printed but not committed comes again
// to the survivor: at least once).
func crashMember(ctx context.Context, c client) error {
	m, err := c.newMember(ctx, opts.topic, opts.group)
	if err != nil {
		return err
	}
	fmt.Println("JOINED")
	for {
		recs, err := m.poll(ctx, 200*time.Millisecond)
		if err != nil {
			return err
		}
		for _, r := range recs {
			fmt.Printf("GOT %s\n", r.Value)
		}
		if len(recs) > 0 {
			if err := m.commit(ctx); err != nil {
				return err
			}
		}
	}
}

// child is the child runner of scenarioCrash and what it printed.
type child struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	got  map[string]bool // values it printed
	done chan struct{}   // closed when its stdout ends
}

func startChild(ctx context.Context) (*child, error) {
	scenario := "group-crash-member"
	if opts.kip848 {
		scenario += "-kip848"
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "--client", opts.client, "--scenario", scenario,
		"--bootstrap", opts.bootstrap, "--topic", opts.topic, "--group", opts.group)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := &child{cmd: cmd, got: map[string]bool{}, done: make(chan struct{})}
	go func() {
		defer close(ch.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "GOT "); ok {
				ch.mu.Lock()
				ch.got[v] = true
				ch.mu.Unlock()
			} else if strings.HasPrefix(line, "RESULT ") {
				logf("child runner: %s", line)
			}
		}
	}()
	return ch, nil
}

// count returns how many values with prefix the child printed.
func (ch *child) count(prefix string) int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	n := 0
	for v := range ch.got {
		if strings.HasPrefix(v, prefix+"-") {
			n++
		}
	}
	return n
}

func (ch *child) has(v string) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.got[v]
}

// kill sends SIGKILL: the member leaves no LeaveGroup behind, and the
// coordinator removes it only when its session expires.
func (ch *child) kill() {
	ch.cmd.Process.Kill()
	<-ch.done
	ch.cmd.Wait()
}

// scenarioCrash is group-crash: member a (here) and member b (a child
// runner) split the 4 partitions; b is killed with SIGKILL while it
// consumes; a takes b's partitions once b's session expires and resumes
// from b's commits. Every record is received by a or printed by b before
// b committed it: none lost (some may come twice, at least once).
func scenarioCrash(ctx context.Context, c client) error {
	a, err := c.newMember(ctx, opts.topic, opts.group)
	if err != nil {
		return fmt.Errorf("member a: %w", err)
	}
	defer a.close()
	b, err := startChild(ctx)
	if err != nil {
		return fmt.Errorf("child runner: %w", err)
	}
	defer b.kill()
	if err := waitGroupStable(ctx, 2, a); err != nil {
		return err
	}
	seen := map[string]bool{}
	values := map[string][]string{}
	produce := func(what, prefix string, n int) error {
		recs := makeRecords(prefix, n, 4)
		for _, r := range recs {
			values[prefix] = append(values[prefix], string(r.Value))
		}
		if err := c.produce(ctx, opts.topic, "none", recs, false); err != nil {
			return fmt.Errorf("produce %s: %w", what, err)
		}
		return nil
	}
	// wait polls a until every record of prefix was received by a or
	// printed by b (by a alone with onlyA), or until stop says so; it
	// returns how many of them a received.
	wait := func(what, prefix string, onlyA bool, stop func() bool) (int, error) {
		got := 0
		deadline := time.Now().Add(60 * time.Second)
		for {
			missing := 0
			for _, v := range values[prefix] {
				if !seen[v] && (onlyA || !b.has(v)) {
					missing++
				}
			}
			if missing == 0 || (stop != nil && stop()) {
				return got, nil
			}
			if time.Now().After(deadline) {
				return got, fmt.Errorf("%s: %d of %d %q records received neither by a nor by b within 60s: lost", what, missing, len(values[prefix]), prefix)
			}
			recs, err := a.poll(ctx, 200*time.Millisecond)
			if err != nil {
				return got, err
			}
			for _, r := range recs {
				if strings.HasPrefix(string(r.Value), prefix+"-") {
					got++
				}
				seen[string(r.Value)] = true
			}
			if len(recs) > 0 {
				if err := a.commit(ctx); err != nil {
					return got, fmt.Errorf("%s: commit of a: %w", what, err)
				}
			}
		}
	}
	if err := produce("phase 1", "c1", 400); err != nil {
		return err
	}
	gotA, err := wait("phase 1 (a and b)", "c1", false, nil)
	if err != nil {
		return err
	}
	if gotA == 0 || b.count("c1") == 0 {
		return fmt.Errorf("phase 1: a got %d records, b %d: partitions not split", gotA, b.count("c1"))
	}
	// Kill b as soon as it printed some of phase 2's records, mid-way.
	if err := produce("phase 2", "c2", 2000); err != nil {
		return err
	}
	if _, err := wait("phase 2 (b consuming)", "c2", false, func() bool { return b.count("c2") > 0 }); err != nil {
		return err
	}
	b.kill()
	logf("b killed after printing %d of the 2000 records of phase 2", b.count("c2"))
	// a alone receives what b had not printed, and every new record:
	// b's partitions are a's, from b's commits.
	if _, err := wait("phase 2 (after b's kill)", "c2", false, nil); err != nil {
		return err
	}
	if err := produce("phase 3", "c3", 400); err != nil {
		return err
	}
	if _, err := wait("phase 3 (a alone after b's kill)", "c3", true, nil); err != nil {
		return err
	}
	return nil
}
