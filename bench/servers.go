package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/twmb/franz-go/pkg/kfake"
)

// serveKfake runs franz-go's in-memory Kafka (kfake) on a port until
// SIGTERM: `bench serve-kfake -port N [-blackhole]`.
func serveKfake(args []string) error {
	fs := flag.NewFlagSet("serve-kfake", flag.ExitOnError)
	port := fs.Int("port", 0, "port to listen on")
	blackhole := fs.Bool("blackhole", false, "acknowledge produce requests without storing them (kfake.BlackholeProduce)")
	fs.Parse(args)
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(*port), kfake.DefaultNumPartitions(8)}
	if *blackhole {
		opts = append(opts, kfake.BlackholeProduce())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	waitSignal()
	return nil
}

// serveNATS runs nats-server with JetStream on file storage in dir until
// SIGTERM: `bench serve-nats -port N -dir D`.
func serveNATS(args []string) error {
	fs := flag.NewFlagSet("serve-nats", flag.ExitOnError)
	port := fs.Int("port", 0, "port to listen on")
	dir := fs.String("dir", "", "JetStream store directory")
	fs.Parse(args)
	opts := &natsserver.Options{
		Host:      "127.0.0.1",
		Port:      *port,
		JetStream: true,
		StoreDir:  *dir,
		NoLog:     true,
		NoSigs:    true,
		// JetStream's own limits leave room for the 1 GB workloads.
		JetStreamMaxStore:  64 << 30,
		JetStreamMaxMemory: 1 << 30,
		MaxPayload:         8 << 20,
	}
	s, err := natsserver.NewServer(opts)
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(30e9) {
		return fmt.Errorf("nats-server not ready")
	}
	waitSignal()
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

func waitSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
	<-ch
}
