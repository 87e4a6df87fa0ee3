// Command franz drives franz-go (github.com/twmb/franz-go/pkg/kgo) for the
// kafkalite client-matrix tests (tests/clients/test_go.py).
//
// Usage:
//
//	franz produce --bootstrap H:P --topic T --count N --partitions P [--prefix S]
//	franz consume --bootstrap H:P --topic T --group G --max-records N [--commit]
//	              [--protocol classic|consumer] [--client-id C] [--timeout SECONDS]
//
// Every stdout line is one JSON object with an "event" field: produced, done,
// assigned, revoked, record, committed, error, closed. produce sends record i
// (key "k<i>", value "<prefix>-<i>") to partition i % P. consume joins the group,
// stops after N records, commits the offset after the last record of each
// partition if --commit, then leaves the group. Client logs go to stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var outMu sync.Mutex

func emit(event string, kv ...any) {
	m := map[string]any{"event": event}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	outMu.Lock()
	defer outMu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

func fail(what string, err error) {
	emit("error", "where", what, "error", fmt.Sprintf("%T", err), "message", err.Error())
	os.Exit(1)
}

// partitionsOf flattens a kgo assignment callback's map to [[topic, partition], ...].
func partitionsOf(m map[string][]int32) [][]any {
	out := [][]any{}
	for t, ps := range m {
		sorted := append([]int32(nil), ps...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		for _, p := range sorted {
			out = append(out, []any{t, p})
		}
	}
	return out
}

type stderrLogger struct{}

func (stderrLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }
func (stderrLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	fmt.Fprintf(os.Stderr, "%s %s %v\n", level, msg, keyvals)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: franz produce|consume --bootstrap H:P ...")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "seed broker")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "", "consumer group")
	count := fs.Int("count", 0, "records to produce")
	partitions := fs.Int("partitions", 1, "partitions to spread produced records over")
	prefix := fs.String("prefix", "v", "value prefix")
	maxRecords := fs.Int("max-records", 0, "records to consume before stopping")
	commit := fs.Bool("commit", false, "commit the consumed offsets before leaving")
	protocol := fs.String("protocol", "classic", "classic (cooperative-sticky, client-side) or consumer (KIP-848)")
	clientID := fs.String("client-id", "kafkalite-franz", "client.id")
	timeout := fs.Int("timeout", 60, "give up after this many seconds")
	fs.Parse(os.Args[2:])

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeout)*time.Second)
	defer cancel()
	base := []kgo.Opt{kgo.SeedBrokers(*bootstrap), kgo.ClientID(*clientID), kgo.WithLogger(stderrLogger{})}

	switch mode {
	case "produce":
		cl, err := kgo.NewClient(append(base, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))...)
		if err != nil {
			fail("new client", err)
		}
		defer cl.Close()
		recs := make([]*kgo.Record, *count)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: *topic, Partition: int32(i % *partitions),
				Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("%s-%d", *prefix, i))}
		}
		for _, r := range cl.ProduceSync(ctx, recs...) {
			if r.Err != nil {
				fail("produce", r.Err)
			}
			emit("produced", "topic", r.Record.Topic, "partition", r.Record.Partition, "offset", r.Record.Offset,
				"key", string(r.Record.Key))
		}
		emit("done", "count", *count)

	case "consume":
		opts := append(base,
			kgo.ConsumerGroup(*group),
			kgo.ConsumeTopics(*topic),
			kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(500*time.Millisecond),
			kgo.SessionTimeout(10*time.Second),
			kgo.HeartbeatInterval(1*time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				emit("assigned", "partitions", partitionsOf(m))
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				emit("revoked", "partitions", partitionsOf(m))
			}),
		)
		if *protocol == "consumer" {
			opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			fail("new client", err)
		}
		var last []*kgo.Record
		next := map[int32]int64{}
		consumed := 0
		for consumed < *maxRecords {
			fetches := cl.PollRecords(ctx, *maxRecords-consumed)
			if ctx.Err() != nil {
				cl.Close()
				fail("poll", fmt.Errorf("timed out after %d records: %w", consumed, ctx.Err()))
			}
			fetches.EachError(func(t string, p int32, err error) {
				emit("fetch_error", "topic", t, "partition", p, "error", err.Error())
			})
			fetches.EachRecord(func(r *kgo.Record) {
				consumed++
				last = append(last, r)
				next[r.Partition] = r.Offset + 1
				emit("record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
					"key", string(r.Key), "value", string(r.Value))
			})
		}
		if *commit {
			if err := cl.CommitRecords(ctx, last...); err != nil {
				cl.Close()
				fail("commit", err)
			}
			offsets := [][]any{}
			for p, o := range next {
				offsets = append(offsets, []any{*topic, p, o})
			}
			emit("committed", "offsets", offsets)
		}
		cl.Close() // leaves the group
		emit("closed")

	default:
		fmt.Fprintln(os.Stderr, "unknown mode", mode)
		os.Exit(2)
	}
}
