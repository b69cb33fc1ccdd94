// Command mbgo drives franz-go (github.com/twmb/franz-go/pkg/kgo) against a broker for
// minibroker's tests (tests/integration/franz_go.py builds and runs it).
//
//	mbgo idempotent-produce -brokers B -topic T -partitions P -n N
//	mbgo txn-produce        -brokers B -topic T -partitions P -txn-id ID -txns K -records M -outcome commit|abort|alternate
//	mbgo consume            -brokers B -topic T -isolation read_committed|read_uncommitted -count N
//	mbgo eos                -brokers B -in T1 -out T2 -group G -txn-id ID
//
// Every subcommand writes JSON lines to stdout (one object per event, "event" names it) and
// franz-go's own log (info level) to stderr. Every loop is bounded by -timeout. Exit codes:
// 0 done, 1 a client error (an {"event":"error"} line says which), 2 bad usage, 3 the time
// limit passed before the work was done.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	exitOK      = 0
	exitError   = 1
	exitUsage   = 2
	exitTimeout = 3
)

var outMu sync.Mutex

// emit writes one JSON line to stdout; the tests parse these, never the log on stderr.
func emit(event string, fields map[string]any) {
	if fields == nil {
		fields = map[string]any{}
	}
	fields["event"] = event
	b, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	outMu.Lock()
	defer outMu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

func fail(what string, err error) int {
	emit("error", map[string]any{"step": what, "error": err.Error()})
	return exitError
}

type common struct {
	brokers  string
	clientID string
	timeout  time.Duration
	logLevel string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.brokers, "brokers", "127.0.0.1:9092", "bootstrap servers, comma separated")
	fs.StringVar(&c.clientID, "client-id", "mbgo", "client.id")
	fs.DurationVar(&c.timeout, "timeout", 60*time.Second, "the whole command's time limit")
	fs.StringVar(&c.logLevel, "log-level", "info", "franz-go's log level on stderr: error|warn|info|debug")
}

func (c *common) opts() []kgo.Opt {
	level := map[string]kgo.LogLevel{"error": kgo.LogLevelError, "warn": kgo.LogLevelWarn,
		"info": kgo.LogLevelInfo, "debug": kgo.LogLevelDebug}[c.logLevel]
	if level == 0 {
		level = kgo.LogLevelInfo
	}
	return []kgo.Opt{
		kgo.SeedBrokers(strings.Split(c.brokers, ",")...),
		kgo.ClientID(c.clientID),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, func() string {
			return time.Now().UTC().Format("15:04:05.000 ")
		})),
	}
}

// value is what record i of transaction k (or of the idempotent run, k = -1) holds.
func value(k, i int) string {
	if k < 0 {
		return fmt.Sprintf("r-%d", i)
	}
	return fmt.Sprintf("t%d-%d", k, i)
}

func idempotentProduce(args []string) int {
	fs := flag.NewFlagSet("idempotent-produce", flag.ContinueOnError)
	var c common
	c.register(fs)
	topic := fs.String("topic", "", "topic")
	parts := fs.Int("partitions", 1, "records go round-robin to partitions 0..P-1")
	n := fs.Int("n", 100, "records")
	if fs.Parse(args) != nil || *topic == "" {
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// Idempotence is franz-go's default (InitProducerId, then sequence numbers per partition).
	cl, err := kgo.NewClient(append(c.opts(), kgo.DefaultProduceTopic(*topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return fail("new-client", err)
	}
	defer cl.Close()
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	for i := 0; i < *n; i++ {
		r := &kgo.Record{Partition: int32(i % *parts), Value: []byte(value(-1, i))}
		wg.Add(1)
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
				return
			}
			emit("produced", map[string]any{"partition": r.Partition, "offset": r.Offset,
				"value": string(r.Value), "producer_id": r.ProducerID, "producer_epoch": r.ProducerEpoch})
		})
	}
	wg.Wait()
	if firstErr != nil {
		if ctx.Err() != nil {
			return exitTimeout
		}
		return fail("produce", firstErr)
	}
	emit("done", map[string]any{"count": *n})
	return exitOK
}

func txnProduce(args []string) int {
	fs := flag.NewFlagSet("txn-produce", flag.ContinueOnError)
	var c common
	c.register(fs)
	topic := fs.String("topic", "", "topic")
	parts := fs.Int("partitions", 1, "each transaction writes to partitions 0..P-1 round-robin")
	txnID := fs.String("txn-id", "", "transactional.id")
	txns := fs.Int("txns", 1, "transactions")
	records := fs.Int("records", 10, "records per transaction")
	outcome := fs.String("outcome", "commit", "commit | abort | alternate (commit, abort, commit, ...)")
	if fs.Parse(args) != nil || *topic == "" || *txnID == "" {
		return exitUsage
	}
	if *outcome != "commit" && *outcome != "abort" && *outcome != "alternate" {
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	cl, err := kgo.NewClient(append(c.opts(), kgo.DefaultProduceTopic(*topic), kgo.TransactionalID(*txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return fail("new-client", err)
	}
	defer cl.Close()
	for k := 0; k < *txns; k++ {
		commit := *outcome == "commit" || (*outcome == "alternate" && k%2 == 0)
		if err := cl.BeginTransaction(); err != nil {
			return fail(fmt.Sprintf("begin-%d", k), err)
		}
		var rs []*kgo.Record
		for i := 0; i < *records; i++ {
			rs = append(rs, &kgo.Record{Partition: int32(i % *parts), Value: []byte(value(k, i))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			if ctx.Err() != nil {
				return exitTimeout
			}
			return fail(fmt.Sprintf("produce-%d", k), err)
		}
		offsets := make([][2]int64, 0, len(rs))
		for _, r := range rs {
			offsets = append(offsets, [2]int64{int64(r.Partition), r.Offset})
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			if ctx.Err() != nil {
				return exitTimeout
			}
			return fail(fmt.Sprintf("end-%d", k), err)
		}
		emit("txn", map[string]any{"n": k, "commit": commit, "offsets": offsets,
			"producer_id": rs[0].ProducerID, "producer_epoch": rs[0].ProducerEpoch})
	}
	emit("done", map[string]any{"txns": *txns})
	return exitOK
}

func consume(args []string) int {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	var c common
	c.register(fs)
	topic := fs.String("topic", "", "topic (every partition, from the start, no group)")
	isolation := fs.String("isolation", "read_committed", "read_committed | read_uncommitted")
	count := fs.Int("count", 0, "records to wait for")
	settle := fs.Duration("settle", 500*time.Millisecond, "after -count records, keep reading this long for extras")
	if fs.Parse(args) != nil || *topic == "" {
		return exitUsage
	}
	iso := kgo.ReadCommitted()
	switch *isolation {
	case "read_committed":
	case "read_uncommitted":
		iso = kgo.ReadUncommitted()
	default:
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	cl, err := kgo.NewClient(append(c.opts(), kgo.ConsumeTopics(*topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		return fail("new-client", err)
	}
	defer cl.Close()
	got := 0
	var settleUntil time.Time
	for {
		if got >= *count {
			if settleUntil.IsZero() {
				settleUntil = time.Now().Add(*settle)
			}
			if !time.Now().Before(settleUntil) {
				break
			}
		}
		pollCtx, pollCancel := context.WithTimeout(ctx, 250*time.Millisecond)
		fetches := cl.PollFetches(pollCtx)
		pollCancel()
		if ctx.Err() != nil {
			emit("done", map[string]any{"count": got, "timed_out": true})
			return exitTimeout
		}
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			return fail("fetch", fe.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			got++
			emit("record", map[string]any{"topic": r.Topic, "partition": r.Partition, "offset": r.Offset,
				"key": string(r.Key), "value": string(r.Value)})
		})
	}
	emit("done", map[string]any{"count": got, "timed_out": false})
	return exitOK
}

// eos is consume-transform-produce: read -in in a consumer group (read_committed), write each
// record's key and upper-cased value to -out, and commit the group's offsets in the same
// transaction (GroupTransactSession: AddOffsetsToTxn + TxnOffsetCommit, or TxnOffsetCommit v5
// alone under transactions v2). It runs until SIGTERM/SIGINT or -timeout; a kill -9 at any point
// followed by a restart with the same -txn-id and -group must leave every input record in -out
// exactly once (read_committed).
func eos(args []string) int {
	fs := flag.NewFlagSet("eos", flag.ContinueOnError)
	var c common
	c.register(fs)
	in := fs.String("in", "", "input topic")
	out := fs.String("out", "", "output topic")
	group := fs.String("group", "", "consumer group")
	txnID := fs.String("txn-id", "", "transactional.id")
	maxBytes := fs.Int("max-partition-bytes", 4096, "fetch.max.partition.bytes: small, so one run is many transactions")
	session := fs.Duration("session-timeout", 6*time.Second, "group session timeout")
	// A killed instance's open transaction holds the group's offsets (OffsetFetch answers
	// UNSTABLE_OFFSET_COMMIT) until the coordinator aborts it at this timeout: the next
	// instance fetches offsets before it initializes its producer id, so it cannot fence
	// the old one first. franz-go's default is 40s; below the session timeout, as its docs advise.
	txnTimeout := fs.Duration("txn-timeout", 5*time.Second, "transaction.timeout.ms")
	if fs.Parse(args) != nil || *in == "" || *out == "" || *group == "" || *txnID == "" {
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	s, err := kgo.NewGroupTransactSession(append(c.opts(),
		kgo.ConsumeTopics(*in), kgo.ConsumerGroup(*group), kgo.TransactionalID(*txnID),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(*session),
		kgo.FetchMaxPartitionBytes(int32(*maxBytes)), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.DefaultProduceTopic(*out), kgo.TransactionTimeout(*txnTimeout),
	)...)
	if err != nil {
		return fail("new-session", err)
	}
	defer s.Close()
	emit("started", map[string]any{"pid": os.Getpid()})
	txns, total := 0, 0
	for {
		select {
		case <-stop:
			emit("stopped", map[string]any{"txns": txns, "records": total})
			return exitOK
		default:
		}
		if ctx.Err() != nil {
			emit("stopped", map[string]any{"txns": txns, "records": total, "timed_out": true})
			return exitTimeout
		}
		pollCtx, pollCancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := s.PollFetches(pollCtx)
		pollCancel()
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			return fail("fetch", fe.Err)
		}
		if fetches.NumRecords() == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return fail("begin", err)
		}
		var rs []*kgo.Record
		fetches.EachRecord(func(r *kgo.Record) {
			rs = append(rs, &kgo.Record{Key: r.Key, Value: []byte(strings.ToUpper(string(r.Value)))})
		})
		produceErr := s.ProduceSync(ctx, rs...).FirstErr()
		committed, err := s.End(ctx, kgo.TransactionEndTry(produceErr == nil))
		if err != nil {
			return fail("end", err)
		}
		if produceErr != nil {
			return fail("produce", produceErr)
		}
		if !committed {
			// The group rebalanced under us: the session aborted, so these records will be
			// read again (by us or by another member) and written then.
			emit("aborted", map[string]any{"records": len(rs)})
			continue
		}
		txns++
		total += len(rs)
		emit("committed", map[string]any{"txn": txns, "records": len(rs), "total": total})
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mbgo idempotent-produce|txn-produce|consume|eos [flags]")
		os.Exit(exitUsage)
	}
	cmds := map[string]func([]string) int{
		"idempotent-produce": idempotentProduce,
		"txn-produce":        txnProduce,
		"consume":            consume,
		"eos":                eos,
	}
	cmd, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "mbgo: unknown subcommand %q\n", os.Args[1])
		os.Exit(exitUsage)
	}
	os.Exit(cmd(os.Args[2:]))
}
