package console

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// chromium returns the browser's path, skipping the test when there is
// none outside CI.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (apt-get install chromium; .ci/run installs it)")
	}
	t.Skip("chromium is not installed: apt-get install chromium to run the browser tests")
	return ""
}

// browser is a headless Chromium tab that records every console error,
// uncaught exception and error log entry (CSP violations, failed loads).
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu   sync.Mutex
	errs []string
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("hide-scrollbars", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: ctx, base: base}
	if err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == "error" || ev.Type == "warning" || ev.Type == "assert" {
				var args []string
				for _, a := range ev.Args {
					args = append(args, a.Description+string(a.Value))
				}
				b.errs = append(b.errs, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.errs = append(b.errs, "exception: "+msg)
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == "error" || ev.Entry.Level == "warning" {
				b.errs = append(b.errs, fmt.Sprintf("log %s: %s (%s)", ev.Entry.Level, ev.Entry.Text, ev.Entry.URL))
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Action[chromedp.Void](func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, cdplog.Enable, cdp.Empty{})
		return chromedp.Void{}, err
	}))
	return b
}

// do runs actions with a deadline, failing the test on an error.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

func run[T any](b *browser, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// open loads path and waits for sel; the page must log no error.
func (b *browser) open(path, sel string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS(sel)))
	b.noErrors(path)
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return run(b, chromedp.Text(chromedp.CSS(sel)))
}

func (b *browser) eval(js string) bool {
	b.t.Helper()
	return run(b, chromedp.Evaluate[bool](js))
}

func (b *browser) noErrors(where string) {
	b.t.Helper()
	b.mu.Lock()
	errs := b.errs
	b.errs = nil
	b.mu.Unlock()
	for _, e := range errs {
		b.t.Errorf("%s: %s", where, e)
	}
}

// shot saves a screenshot of the viewport as name.png in the artifacts
// directory, and in SAMSA_CONSOLE_DOCS when docs is set.
func (b *browser) shot(name string, docs bool) {
	b.t.Helper()
	png := run(b, chromedp.CaptureScreenshot())
	dir := os.Getenv("SAMSA_ARTIFACTS")
	if dir == "" {
		dir = artifacts(b.t)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	if d := os.Getenv("SAMSA_CONSOLE_DOCS"); d != "" && docs {
		if len(png) > 150<<10 {
			b.t.Errorf("screenshot %s is %d KiB, over the 150 KiB of docs/", name, len(png)>>10)
		}
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
}

// artifacts is where t's screenshots go when SAMSA_ARTIFACTS is not set:
// a directory of t's own, removed when t ends. (One directory made by the
// first subtest and shared was removed at that subtest's end, made again
// by the next screenshot's MkdirAll and then left in /tmp.)
func artifacts(t *testing.T) string {
	return t.TempDir()
}

// noOverflow checks that the page body is no wider than the viewport at
// width px.
func (b *browser) noOverflow(path, sel string, width int64) {
	b.t.Helper()
	b.do(chromedp.EmulateViewport(width, 800))
	b.open(path, sel)
	if !b.eval(`document.documentElement.scrollWidth <= window.innerWidth && document.body.scrollWidth <= window.innerWidth`) {
		w := run(b, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
		b.t.Errorf("%s at %d px: the page is %d px wide", path, width, w)
	}
}

var _ = kb.Enter
