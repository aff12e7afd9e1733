package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// phaseProfiler writes profiles of the server's start (process start until
// it serves) and of its stop (signal until exit) to a directory, for
// `samsa server --profile-phases DIR`: a restart or a shutdown of a node
// holding 100,000 partitions is over before an HTTP profile
// (--pprof) could be fetched. Each phase gets PHASE.cpu.pprof (CPU),
// PHASE.block.pprof (where goroutines blocked on channels, mutexes and
// select, every event sampled; cumulative since the process started, so
// compare stop against start with `go tool pprof -base`) and PHASE.trace
// (`go tool trace`: system calls, scheduling and blocking over time). Not
// safe for concurrent use; phases run one at a time.
type phaseProfiler struct {
	dir   string
	phase string
	cpu   *os.File
	trace *os.File
}

// startPhaseProfiler creates dir and begins the "start" phase.
func startPhaseProfiler(dir string) (*phaseProfiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--profile-phases: %w", err)
	}
	runtime.SetBlockProfileRate(1)
	p := &phaseProfiler{dir: dir}
	if err := p.begin("start"); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *phaseProfiler) begin(phase string) error {
	p.phase = phase
	cpu, err := os.Create(filepath.Join(p.dir, phase+".cpu.pprof"))
	if err != nil {
		return fmt.Errorf("--profile-phases: %w", err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return fmt.Errorf("--profile-phases: %w", err)
	}
	tr, err := os.Create(filepath.Join(p.dir, phase+".trace"))
	if err == nil {
		err = trace.Start(tr)
	}
	if err != nil {
		pprof.StopCPUProfile()
		cpu.Close()
		if tr != nil {
			tr.Close()
		}
		return fmt.Errorf("--profile-phases: %w", err)
	}
	p.cpu, p.trace = cpu, tr
	return nil
}

// end finishes the current phase's files.
func (p *phaseProfiler) end() error {
	if p.cpu == nil {
		return nil
	}
	pprof.StopCPUProfile()
	trace.Stop()
	err := errors.Join(p.cpu.Close(), p.trace.Close())
	p.cpu, p.trace = nil, nil
	b, cerr := os.Create(filepath.Join(p.dir, p.phase+".block.pprof"))
	if cerr != nil {
		return errors.Join(err, cerr)
	}
	return errors.Join(err, pprof.Lookup("block").WriteTo(b, 0), b.Close())
}
