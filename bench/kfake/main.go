// Command kfake-broker runs franz-go's kfake (an in-memory fake Kafka cluster)
// as one broker on 127.0.0.1 for bench/compare.py: the third column of the
// "kafkalite vs Apache Kafka" comparison.
//
//	kfake-broker -port 9092 [-data-dir DIR] [-heartbeat-interval-ms 500] [-c key=value ...]
//
// It prints "READY 127.0.0.1:<port> new_cluster_ms=<ms>" on stdout once the
// cluster listens (new_cluster_ms is the time kfake.NewCluster took, which with
// -data-dir includes reloading the persisted state) and stops on SIGTERM or
// SIGINT (with -data-dir, kfake saves its state to disk first).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

type configFlag map[string]string

func (f configFlag) String() string { return "" }

func (f configFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("expected key=value, got %q", s)
	}
	f[k] = v
	return nil
}

func main() {
	port := flag.Int("port", 0, "port on 127.0.0.1 (0: any free port)")
	dataDir := flag.String("data-dir", "", "persist state here and reload it at start (default: in memory only)")
	partitions := flag.Int("partitions", 1, "partitions of auto-created topics and of CreateTopics with -1 (Kafka's num.partitions in the comparison)")
	heartbeat := flag.Int("heartbeat-interval-ms", 500, "group.consumer.heartbeat.interval.ms (KIP-848)")
	logLevel := flag.String("log-level", "warn", "none, error, warn, info or debug (to stderr)")
	seed := flag.String("seed-topics", "", "comma-separated topics to create at start (with -partitions partitions)")
	configs := configFlag{}
	flag.Var(configs, "c", "broker config key=value (repeatable)")
	flag.Parse()

	level := map[string]kfake.LogLevel{
		"none": kfake.LogLevelNone, "error": kfake.LogLevelError, "warn": kfake.LogLevelWarn,
		"info": kfake.LogLevelInfo, "debug": kfake.LogLevelDebug,
	}[strings.ToLower(*logLevel)]

	configs["group.consumer.heartbeat.interval.ms"] = fmt.Sprint(*heartbeat)
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(*port),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(*partitions),
		kfake.BrokerConfigs(configs),
		kfake.WithLogger(kfake.BasicLogger(os.Stderr, level)),
	}
	if *seed != "" {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), strings.Split(*seed, ",")...))
	}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
	}

	t0 := time.Now()
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake: %v\n", err)
		os.Exit(1)
	}
	took := time.Since(t0)
	addrs := c.ListenAddrs()
	fmt.Printf("READY %s new_cluster_ms=%.3f\n", addrs[0], float64(took.Microseconds())/1000)
	os.Stdout.Sync()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	<-sigs
	c.Close()
}
