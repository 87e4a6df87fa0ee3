// Command segmentio drives segmentio/kafka-go (github.com/segmentio/kafka-go)
// for the kafkalite client-matrix tests (tests/clients/test_go.py).
//
// Usage:
//
//	segmentio produce --bootstrap H:P --topic T --count N --partitions P [--prefix S]
//	segmentio consume --bootstrap H:P --topic T --group G --max-records N [--commit]
//	                  [--client-id C] [--timeout SECONDS]
//
// Every stdout line is one JSON object with an "event" field: produced, done,
// assigned, record, committed, error, closed. produce writes record i (key
// "k<i>", value "<prefix>-<i>") to partition i % P through a kafka.Writer.
// consume reads through a kafka.Reader with a GroupID, stops after N records,
// commits them with CommitMessages if --commit, and closes (leaving the group).
// The Reader has no rebalance callback; "assigned" is taken from its log line
// listing the partitions it subscribed to and the offsets it starts from.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
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

// byKey sends "k<i>" to partition i % len(partitions).
type byKey struct{}

func (byKey) Balance(msg kafka.Message, partitions ...int) int {
	i, err := strconv.Atoi(strings.TrimPrefix(string(msg.Key), "k"))
	if err != nil {
		return partitions[0]
	}
	return partitions[i%len(partitions)]
}

// subscribed turns the Reader's "subscribed to topics and partitions" log
// argument (a map of an unexported {topic, partition} struct to the start
// offset) into [[topic, partition, offset], ...].
func subscribed(arg any) [][]any {
	out := [][]any{}
	v := reflect.ValueOf(arg)
	if v.Kind() != reflect.Map {
		return out
	}
	for _, k := range v.MapKeys() {
		if k.Kind() != reflect.Struct {
			continue
		}
		out = append(out, []any{k.FieldByName("topic").String(), k.FieldByName("partition").Int(), v.MapIndex(k).Int()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][1].(int64) < out[j][1].(int64) })
	return out
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: segmentio produce|consume --bootstrap H:P ...")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "seed broker")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "", "consumer group")
	count := fs.Int("count", 0, "records to produce")
	partitions := fs.Int("partitions", 1, "partitions of the topic (the balancer sends k<i> to i % P)")
	prefix := fs.String("prefix", "v", "value prefix")
	maxRecords := fs.Int("max-records", 0, "records to consume before stopping")
	commit := fs.Bool("commit", false, "commit the consumed offsets before leaving")
	clientID := fs.String("client-id", "kafkalite-segmentio", "client id")
	timeout := fs.Int("timeout", 60, "give up after this many seconds")
	fs.Parse(os.Args[2:])

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeout)*time.Second)
	defer cancel()
	dialer := &kafka.Dialer{ClientID: *clientID, Timeout: 10 * time.Second}
	errLog := kafka.LoggerFunc(func(f string, a ...any) { fmt.Fprintf(os.Stderr, "ERROR "+f+"\n", a...) })

	switch mode {
	case "produce":
		w := &kafka.Writer{
			Addr:         kafka.TCP(*bootstrap),
			Topic:        *topic,
			Balancer:     byKey{},
			RequiredAcks: kafka.RequireAll,
			BatchTimeout: 5 * time.Millisecond,
			Transport:    &kafka.Transport{ClientID: *clientID},
			ErrorLogger:  errLog,
		}
		msgs := make([]kafka.Message, *count)
		for i := range msgs {
			msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("%s-%d", *prefix, i))}
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			fail("produce", err)
		}
		if err := w.Close(); err != nil {
			fail("close", err)
		}
		// the Writer reports no offsets; the test checks them by consuming
		for i, m := range msgs {
			emit("produced", "topic", *topic, "partition", i%*partitions, "key", string(m.Key))
		}
		emit("done", "count", *count)

	case "consume":
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:           []string{*bootstrap},
			GroupID:           *group,
			Topic:             *topic,
			Dialer:            dialer,
			StartOffset:       kafka.FirstOffset,
			MinBytes:          1,
			MaxBytes:          1 << 20,
			MaxWait:           500 * time.Millisecond,
			HeartbeatInterval: 1 * time.Second,
			SessionTimeout:    10 * time.Second,
			RebalanceTimeout:  10 * time.Second,
			JoinGroupBackoff:  500 * time.Millisecond,
			CommitInterval:    0, // CommitMessages is synchronous
			Logger: kafka.LoggerFunc(func(f string, a ...any) {
				if strings.HasPrefix(f, "subscribed to topics and partitions") && len(a) == 1 {
					emit("assigned", "partitions", subscribed(a[0]))
				}
				fmt.Fprintf(os.Stderr, "INFO "+strings.TrimSuffix(f, "\n")+"\n", a...)
			}),
			ErrorLogger: errLog,
		})
		var got []kafka.Message
		next := map[int]int64{}
		for len(got) < *maxRecords {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				r.Close()
				fail("fetch", fmt.Errorf("after %d records: %w", len(got), err))
			}
			got = append(got, m)
			next[m.Partition] = m.Offset + 1
			emit("record", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset,
				"key", string(m.Key), "value", string(m.Value))
		}
		if *commit {
			if err := r.CommitMessages(ctx, got...); err != nil {
				r.Close()
				fail("commit", err)
			}
			offsets := [][]any{}
			for p, o := range next {
				offsets = append(offsets, []any{*topic, p, o})
			}
			emit("committed", "offsets", offsets)
		}
		if err := r.Close(); err != nil {
			fail("close", err)
		}
		emit("closed")

	default:
		fmt.Fprintln(os.Stderr, "unknown mode", mode)
		os.Exit(2)
	}
}
