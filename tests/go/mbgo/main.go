// mbgo: franz-go client programs the Python tests run against minibroker (and Apache Kafka).
//
//	mbgo txn-produce -brokers B -topic T -txn-id ID -txns N -records M [-abort-every K]
//	mbgo consume -brokers B -topic T [-read-uncommitted] -max N [-idle 5s]
//
// Each prints one JSON object per line on stdout (franz-go's own log goes to stderr) and
// exits 0 on success, 1 on a client error, 2 on bad usage. Every loop is bounded.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func emit(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func fail(format string, args ...any) {
	emit(map[string]any{"error": fmt.Sprintf(format, args...)})
	os.Exit(1)
}

func clientOpts(brokers string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)),
		kgo.RequestTimeoutOverhead(5 * time.Second),
	}
}

func txnProduce(args []string) {
	fs := flag.NewFlagSet("txn-produce", flag.ExitOnError)
	brokers := fs.String("brokers", "", "bootstrap servers")
	topic := fs.String("topic", "", "topic")
	txnID := fs.String("txn-id", "", "transactional id")
	txns := fs.Int("txns", 3, "transactions")
	records := fs.Int("records", 5, "records per transaction")
	abortEvery := fs.Int("abort-every", 0, "abort every k-th transaction (1-based); 0: commit all")
	_ = fs.Parse(args)
	if *brokers == "" || *topic == "" || *txnID == "" || *txns < 1 || *txns > 10000 || *records < 1 || *records > 100000 {
		fmt.Fprintln(os.Stderr, "txn-produce: -brokers, -topic, -txn-id needed; 1 <= -txns <= 10000, 1 <= -records <= 100000")
		os.Exit(2)
	}
	opts := append(clientOpts(*brokers), kgo.TransactionalID(*txnID), kgo.DefaultProduceTopic(*topic),
		kgo.TransactionTimeout(30*time.Second))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()
	for t := 1; t <= *txns; t++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := cl.BeginTransaction(); err != nil {
			cancel()
			fail("begin %d: %v", t, err)
		}
		commit := *abortEvery == 0 || t%*abortEvery != 0
		for i := 0; i < *records; i++ {
			value := fmt.Sprintf("t%d-r%d-%s", t, i, map[bool]string{true: "commit", false: "abort"}[commit])
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(value)}).FirstErr(); err != nil {
				cancel()
				fail("produce txn %d record %d: %v", t, i, err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			cancel()
			fail("end txn %d (commit=%v): %v", t, commit, err)
		}
		cancel()
		emit(map[string]any{"txn": t, "committed": commit, "records": *records})
	}
}

func consume(args []string) {
	fs := flag.NewFlagSet("consume", flag.ExitOnError)
	brokers := fs.String("brokers", "", "bootstrap servers")
	topic := fs.String("topic", "", "topic")
	uncommitted := fs.Bool("read-uncommitted", false, "read_uncommitted (default read_committed)")
	maxRecords := fs.Int("max", 1000, "stop after this many records")
	idle := fs.Duration("idle", 5*time.Second, "stop after this long without a record")
	_ = fs.Parse(args)
	if *brokers == "" || *topic == "" || *maxRecords < 1 || *maxRecords > 1000000 {
		fmt.Fprintln(os.Stderr, "consume: -brokers and -topic needed; 1 <= -max <= 1000000")
		os.Exit(2)
	}
	iso := kgo.ReadCommitted()
	if *uncommitted {
		iso = kgo.ReadUncommitted()
	}
	opts := append(clientOpts(*brokers), kgo.ConsumeTopics(*topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()
	got := 0
	deadline := time.Now().Add(2 * time.Minute) // a hard bound whatever happens
	for got < *maxRecords && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), *idle)
		fetches := cl.PollFetches(ctx)
		cancel()
		if fetches.IsClientClosed() {
			break
		}
		idleOut := false
		fetches.EachError(func(t string, p int32, err error) {
			if err == context.DeadlineExceeded {
				idleOut = true
				return
			}
			fail("fetch %s[%d]: %v", t, p, err)
		})
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			got++
			emit(map[string]any{"partition": r.Partition, "offset": r.Offset, "key": string(r.Key), "value": string(r.Value)})
		})
		if n == 0 && idleOut {
			break
		}
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mbgo txn-produce|consume [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "txn-produce":
		txnProduce(os.Args[2:])
	case "consume":
		consume(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "mbgo: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}
