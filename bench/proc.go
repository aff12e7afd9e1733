package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// server is a broker (or NATS server) running as a child process, so that
// its CPU time and resident memory are its own.
type server struct {
	name string
	cmd  *exec.Cmd
	addr string
	log  *bytes.Buffer
	dir  string
}

// freePort returns a loopback port that was free a moment ago.
func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startServer runs argv and waits until addr accepts connections.
func startServer(name, addr, dir string, argv ...string) (*server, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	var log bytes.Buffer
	cmd.Stdout = &log
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd, addr: addr, log: &log, dir: dir}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s did not listen on %s: %v\n%s", name, addr, err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// usage is a process's CPU time and peak resident memory.
type usage struct {
	CPUSeconds float64 `json:"cpu_s"`
	PeakRSSMB  float64 `json:"peak_rss_mb"`
}

// clockTicks is sysconf(_SC_CLK_TCK), 100 on every Linux we run on.
const clockTicks = 100

// sample reads the server's CPU seconds so far (user plus system) and its
// peak resident set (VmHWM) from /proc.
func (s *server) sample() usage {
	var u usage
	pid := s.cmd.Process.Pid
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the parenthesised command name; utime and stime
		// are fields 14 and 15 of the whole line.
		if i := bytes.LastIndexByte(b, ')'); i > 0 {
			f := strings.Fields(string(b[i+1:]))
			if len(f) > 13 {
				ut, _ := strconv.ParseFloat(f[11], 64)
				st, _ := strconv.ParseFloat(f[12], 64)
				u.CPUSeconds = (ut + st) / clockTicks
			}
		}
	}
	if f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				u.PeakRSSMB = kb / 1024
			}
		}
		f.Close()
	}
	return u
}

// stop ends the server with SIGTERM (SIGKILL after 20 s) and removes its
// data directory.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// clientRun is one run of a load generator: its final JSON line and its own
// CPU time and peak memory.
type clientRun struct {
	Result map[string]any
	Usage  usage
	Wall   time.Duration
}

// runClient runs argv to its end (at most limit) and decodes the last line
// of its standard output as JSON.
func runClient(limit time.Duration, argv ...string) (*clientRun, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errOut bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, tail(errOut.String(), 2000))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		return nil, fmt.Errorf("%s: final line: %w", strings.Join(argv, " "), err)
	}
	run := &clientRun{Result: res, Wall: wall}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		run.Usage.CPUSeconds = tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
		run.Usage.PeakRSSMB = float64(ru.Maxrss) / 1024 // kB on Linux
	}
	return run, nil
}

func tvSeconds(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// num reads a number from a decoded JSON object by a dotted path.
func num(m map[string]any, path string) float64 {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return 0
		}
		v = mm[k]
	}
	f, _ := v.(float64)
	return f
}
