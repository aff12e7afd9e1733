package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/samsahq/samsa/internal/buildinfo"
)

// NewRegistry returns a registry with the Go runtime's metrics (go_*, GC
// pause and scheduler latency histograms from runtime/metrics: the
// equivalent of a JVM's GC metrics), the process's (process_open_fds,
// process_resident_memory_bytes, ...), samsa_build_info and cs.
func NewRegistry(cs ...prometheus.Collector) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	all := append([]prometheus.Collector{
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsGC, collectors.MetricsScheduler)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(),
	}, cs...)
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// buildInfo is samsa_build_info: the build of the running binary
// (internal/buildinfo).
func buildInfo() prometheus.Collector {
	bi := buildinfo.Read()
	revision := bi.Revision
	if revision == "" {
		revision = "unknown"
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "samsa_build_info",
		Help:        "Always 1; the labels say which build of Samsa runs.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": revision, "modified": strconv.FormatBool(bi.Modified), "goversion": bi.GoVersion},
	}, func() float64 { return 1 })
}

// MaxScrapes is how many /metrics responses are encoded at once; more
// scrapes wait for one of them to finish (or for their client to leave).
// Concurrent scrapes share one gather of the registry (sharedGather), so
// what each adds is its encoded response, which it holds in memory until
// written (http.TimeoutHandler buffers it): bounding them bounds that.
// Before scrapes shared a gather, 20 concurrent scrapes of a node with
// 2,000 partitions (35,000 series, 2.5 MB of text) took it from 71 MB to
// 594 MB resident.
const MaxScrapes = 4

// Server is the operations HTTP listener (http.listener): /metrics in the
// Prometheus text format or OpenMetrics (by the Accept header; scrapes
// that arrive while a gather runs share its result, see sharedGather;
// MaxScrapes encode at once), /healthz
// (200 while the process serves HTTP) and /readyz (200 when ready returns
// nil, else 503 with its error), for Kubernetes probes; every other path
// goes to the root handler given to Listen (the web console), when any.
type Server struct {
	srv    *http.Server
	ln     net.Listener
	gather *sharedGather
	done   chan struct{}
}

// Listen binds addr (host:port; port 0 picks a free one), or serves ln
// when not nil, and serves reg and the probes, over TLS with tc when not
// nil (http.listener.security.protocol=SSL). ready is called for each
// /readyz. root, when not nil, serves every other path (the web console,
// internal/console). logger nil discards.
func Listen(addr string, ln net.Listener, tc *tls.Config, reg *prometheus.Registry, ready func() error, root http.Handler, logger *slog.Logger) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("http.listener %s: %w", addr, err)
		}
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	gather := &sharedGather{g: reg}
	mux := http.NewServeMux()
	mux.Handle("/metrics", scrapeHandler(gather, ScrapeTimeout, logger))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	if root != nil {
		mux.Handle("/", root)
	}
	s := &Server{
		srv:    &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)},
		ln:     ln,
		gather: gather,
		done:   make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("http listener stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() *net.TCPAddr { return s.ln.Addr().(*net.TCPAddr) }

// Close stops the listener, waits up to a second for requests in flight,
// then closes their connections, and waits for a gather in progress to
// end (its collectors read the node).
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	<-s.done
	s.gather.close()
	return err
}
