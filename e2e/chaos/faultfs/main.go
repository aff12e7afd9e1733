// Command faultfs is the samsa command on a fault-injecting filesystem,
// for the fault harness (e2e/chaos) and the tests that need a real
// process to meet a disk fault. It is a separate main package that tests
// build (proctest.BinaryOf "./e2e/chaos/faultfs"): the release binary,
// cmd/samsa, does not import vfs/errorfs (TestReleaseBinaryHasNoFaults),
// and production code has no hook for it; the filesystem reaches the
// server as cli.Options.FS, as samsa.Config.FS does in process.
//
//	faultfs -control SOCKET server --override ...
//
// runs `samsa server ...` with every file of its log dirs through
// internal/storage/vfs/errorfs: a CrashFS (what is not fsynced is lost at
// a crash) under a DiskFull disk (unlimited until told) and a Toggle
// failing every fsync (off until told). It listens on the Unix socket
// SOCKET for commands, one a line, each answered with one line ("ok ..."
// or "error ..."):
//
//	full        the disk has no free byte left: writes fail with ENOSPC
//	free        the disk has space again
//	fsync-fail  every fsync (of a file, a directory, syncfs) fails with EIO
//	fsync-ok    fsyncs work again
//	crash [N]   power loss: every file is left as of its last fsync (N,
//	            when given and not 0, seeds a torn writeback instead: a
//	            random part of the unsynced pages kept), then the process
//	            kills itself with SIGKILL; no answer
//
// Without -control it is the samsa command.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/samsahq/samsa/internal/cli"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
)

func main() {
	fl := flag.NewFlagSet("faultfs", flag.ExitOnError)
	control := fl.String("control", "", "Unix `socket` to take fault commands on")
	fl.Parse(os.Args[1:])
	if *control == "" {
		os.Exit(cli.Main(fl.Args()))
	}
	f := newFaults()
	os.Remove(*control)
	l, err := net.Listen("unix", *control)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultfs:", err)
		os.Exit(2)
	}
	go f.serve(l)
	code := cli.Run(fl.Args(), cli.Options{FS: f.fs})
	l.Close()
	os.Exit(code)
}

// faults are the filesystem of the server and its switches.
type faults struct {
	crash *errorfs.CrashFS
	disk  *errorfs.DiskFull
	fsync *errorfs.Toggle
	fs    *errorfs.FS
}

func newFaults() *faults {
	f := &faults{
		crash: errorfs.NewCrashFS(nil),
		disk:  errorfs.NewDiskFull(math.MaxInt64),
		fsync: &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpSync}},
	}
	f.fs = errorfs.Wrap(f.crash, f.disk, f.fsync)
	return f
}

// serve answers the commands of every connection to l until l closes.
func (f *faults) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				fmt.Fprintln(c, f.do(sc.Text()))
			}
		}()
	}
}

// do runs one command and returns its answer.
func (f *faults) do(line string) string {
	args := strings.Fields(line)
	if len(args) == 0 {
		return "error: empty command"
	}
	switch args[0] {
	case "full":
		f.disk.SetFree(0)
		fmt.Fprintln(os.Stderr, "faultfs: the disk is full")
		return "ok"
	case "free":
		f.disk.SetFree(math.MaxInt64)
		fmt.Fprintln(os.Stderr, "faultfs: the disk has space again")
		return fmt.Sprintf("ok refused=%d", f.disk.Refused())
	case "fsync-fail":
		f.fsync.Set(true)
		fmt.Fprintln(os.Stderr, "faultfs: fsync fails")
		return "ok"
	case "fsync-ok":
		f.fsync.Set(false)
		fmt.Fprintln(os.Stderr, "faultfs: fsync works again")
		return fmt.Sprintf("ok failed=%d", f.fsync.Count())
	case "crash":
		var opts errorfs.CrashOptions
		if len(args) > 1 {
			seed, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil {
				return "error: crash seed: " + err.Error()
			}
			if seed != 0 {
				opts.Rand = rand.New(rand.NewPCG(seed, 0))
			}
		}
		unsynced := f.crash.Unsynced()
		err := f.crash.Crash(opts)
		// Logged before the kill: the harness keeps stderr.
		fmt.Fprintf(os.Stderr, "faultfs: power loss, %d files had unsynced changes (restore errors: %v)\n", unsynced, err)
		if err != nil && !errors.Is(err, errorfs.ErrCrashed) {
			fmt.Fprintln(os.Stderr, "faultfs: the crash left files as they were:", err)
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal ends the process
	default:
		return "error: unknown command " + strconv.Quote(args[0])
	}
}
