// Command loadgen is bench/run.py's compiled load generator (issue 21): a franz-go producer
// that can drive more than the broker takes on one core. Each run prints one JSON line, as
// bench/workloads.py does, with the same field names so the harness merges either.
//
//	loadgen produce --bootstrap H:P --topic T --size 1024 --seconds 3 --partitions 3
//	loadgen txn     --bootstrap H:P --topic T --size 1024 --seconds 3 --partition 0 --per-txn 10
//
// The client settings follow workloads.py's PRODUCE_CONF as far as franz-go has them:
// idempotent (franz-go's default), acks=all, linger 5 ms, record batches of up to 1 MiB, no
// compression, up to 5 produce requests in flight per broker (franz-go's fixed number with
// idempotence, as librdkafka's maximum), TCP_NODELAY (Go's default, = socket.nagle.disable).
// produce sends records to partitions 0..N-1 explicitly, --chunk (1000) at a time to each, like
// workloads.py; txn begins, produces --per-txn records to --partition, flushes, commits, repeats.
// "cpu" is this process's user+system time (getrusage RUSAGE_SELF) over the timed window,
// every goroutine and OS thread included; start/end are Unix times in seconds.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

type opts struct {
	bootstrap  string
	topic      string
	size       int
	seconds    float64
	partitions int
	partition  int
	perTxn     int
	chunk      int
	cpuprofile string
	logLevel   string
}

func cpuSeconds() (user, sys float64) {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0, 0
	}
	return float64(r.Utime.Sec) + float64(r.Utime.Usec)/1e6, float64(r.Stime.Sec) + float64(r.Stime.Usec)/1e6
}

func minorFaults() int64 {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return r.Minflt
}

func unixNow() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func emit(v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func fail(format string, a ...any) {
	emit(map[string]any{"error": fmt.Sprintf(format, a...)})
	os.Exit(1)
}

// errCount counts failed records and keeps the first error's text.
type errCount struct {
	n     atomic.Int64
	mu    sync.Mutex
	first string
}

func (e *errCount) add(err error) {
	e.mu.Lock()
	if e.first == "" {
		e.first = err.Error()
	}
	e.mu.Unlock()
	e.n.Add(1) // after first: a reader that sees n > 0 finds the text
}

func (e *errCount) firstErr() any {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.first == "" {
		return nil
	}
	return e.first
}

func clientOpts(o opts, extra ...kgo.Opt) []kgo.Opt {
	// ApiVersions at most v2, for every broker alike (it is asked once per connection): Tansu 0.6
	// closes the connection on franz-go's v5 once it carries KIP-1242's ClusterID and NodeID (every
	// connection but the seed's), and the librdkafka mock knows v0-v2 only and answers v3+ with a
	// flexible UNSUPPORTED_VERSION response franz-go cannot read (librdkafka retries with v2).
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(18, 2)
	base := []kgo.Opt{
		kgo.MaxVersions(versions),
		kgo.SeedBrokers(o.bootstrap),
		kgo.DefaultProduceTopic(o.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.ProducerBatchMaxBytes(1024 * 1024),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(1000000),         // queue.buffering.max.messages
		kgo.MaxBufferedBytes(256 * 1024 * 1024), // queue.buffering.max.kbytes
		kgo.ProduceRequestTimeout(30 * time.Second),
		kgo.ClientID("minibroker-bench-loadgen"),
	}
	if lvl := map[string]kgo.LogLevel{"error": kgo.LogLevelError, "warn": kgo.LogLevelWarn,
		"info": kgo.LogLevelInfo, "debug": kgo.LogLevelDebug}[o.logLevel]; lvl != kgo.LogLevelNone {
		base = append(base, kgo.WithLogger(kgo.BasicLogger(os.Stderr, lvl, nil)))
	}
	return append(base, extra...)
}

func value(size int) []byte {
	v := make([]byte, size)
	_, _ = rand.Read(v)
	return v
}

func warmUp(ctx context.Context, cl *kgo.Client, o opts) {
	// Metadata and the producer id, outside the timed window.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(wctx, &kgo.Record{Value: make([]byte, o.size), Partition: 0}).FirstErr(); err != nil {
		fail("warm-up produce failed: %v", err)
	}
}

func produce(o opts) {
	errs := &errCount{}
	cl, err := kgo.NewClient(clientOpts(o)...)
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()
	// Records still waiting for buffer space when the broker stops answering fail with the context.
	ctx, cancelRun := context.WithTimeout(context.Background(), time.Duration(o.seconds*float64(time.Second))+60*time.Second)
	defer cancelRun()
	warmUp(ctx, cl, o)

	val := value(o.size)
	nparts := max(o.partitions, 1)
	var ok atomic.Int64
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			errs.add(err)
		} else {
			ok.Add(1)
		}
	}
	var n int64
	f0 := minorFaults()
	u0, s0 := cpuSeconds()
	t0 := unixNow()
	deadline := time.Now().Add(time.Duration(o.seconds * float64(time.Second)))
	for batch := 0; ; batch++ {
		part := int32(batch % nparts)
		// One allocation per chunk, not per record; and one timestamp per chunk: franz-go would
		// call time.Now() for every record without one, a tenth of this process's CPU at 100 B.
		recs := make([]kgo.Record, o.chunk)
		now := time.Now()
		for i := range recs {
			r := &recs[i]
			r.Topic = o.topic
			r.Partition = part
			r.Value = val
			r.Timestamp = now
			cl.Produce(ctx, r, promise) // blocks while MaxBufferedRecords/Bytes are reached
			n++
		}
		if !now.Before(deadline) {
			break
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	flushErr := cl.Flush(fctx)
	cancel()
	t1 := unixNow()
	u1, s1 := cpuSeconds()
	good := ok.Load()
	bad := errs.n.Load()
	out := map[string]any{
		"generator": "go", "mode": "produce",
		"records": good, "bytes": good * int64(o.size), "start": t0, "end": t1, "seconds": t1 - t0,
		"mb_per_s": float64(good*int64(o.size)) / (t1 - t0) / 1e6,
		"cpu":      (u1 - u0) + (s1 - s0), "cpu_user": u1 - u0, "cpu_sys": s1 - s0,
		"minflt": minorFaults() - f0, "errors": bad, "first_error": errs.firstErr(),
		"unflushed": n - good - bad,
	}
	if flushErr != nil {
		out["flush_error"] = flushErr.Error()
	}
	emit(out)
}

func txn(o opts) {
	errs := &errCount{}
	id := fmt.Sprintf("bench-go-%s-%d-%d", o.topic, o.partition, os.Getpid())
	cl, err := kgo.NewClient(clientOpts(o, kgo.TransactionalID(id), kgo.TransactionTimeout(60*time.Second))...)
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()
	ctx := context.Background()
	val := value(o.size)
	part := int32(o.partition)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			errs.add(err)
		}
	}
	recs := make([]kgo.Record, o.perTxn)
	one := func(limit time.Duration) error {
		// A broker that stops answering fails the run instead of hanging it.
		tctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		if err := cl.BeginTransaction(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		for i := range recs {
			recs[i] = kgo.Record{Topic: o.topic, Partition: part, Value: val}
			cl.Produce(tctx, &recs[i], promise)
		}
		// franz-go's EndTransaction does not flush: the records go out first.
		if err := cl.Flush(tctx); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
		if errs.n.Load() > 0 {
			_ = cl.EndTransaction(tctx, kgo.TryAbort)
			return fmt.Errorf("produce: %v", errs.firstErr())
		}
		if err := cl.EndTransaction(tctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	}
	// Warm-up transaction (InitProducerId, metadata, AddPartitionsToTxn), outside the window.
	if err := one(20 * time.Second); err != nil {
		fail("warm-up transaction failed: %v", err)
	}
	var n int64
	u0, s0 := cpuSeconds()
	t0 := unixNow()
	deadline := time.Now().Add(time.Duration(o.seconds * float64(time.Second)))
	var txnErr error
	for time.Now().Before(deadline) {
		if txnErr = one(60 * time.Second); txnErr != nil {
			break
		}
		n++
	}
	t1 := unixNow()
	u1, s1 := cpuSeconds()
	out := map[string]any{
		"generator": "go", "mode": "txn",
		"transactions": n, "records": n * int64(o.perTxn), "bytes": n * int64(o.perTxn) * int64(o.size),
		"start": t0, "end": t1, "seconds": t1 - t0,
		"mb_per_s": float64(n*int64(o.perTxn)*int64(o.size)) / (t1 - t0) / 1e6,
		"cpu":      (u1 - u0) + (s1 - s0), "cpu_user": u1 - u0, "cpu_sys": s1 - s0,
		"errors": errs.n.Load(), "first_error": errs.firstErr(),
	}
	if txnErr != nil {
		out["errors"] = max(errs.n.Load(), 1)
		out["first_error"] = txnErr.Error()
	}
	emit(out)
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "produce" && os.Args[1] != "txn") {
		fmt.Fprintln(os.Stderr, "usage: loadgen produce|txn --bootstrap H:P --topic T [--size B] [--seconds S] "+
			"[--partitions N] [--partition P] [--per-txn N]")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	var o opts
	fs.StringVar(&o.bootstrap, "bootstrap", "", "host:port")
	fs.StringVar(&o.topic, "topic", "", "topic")
	fs.IntVar(&o.size, "size", 1024, "value size in bytes")
	fs.Float64Var(&o.seconds, "seconds", 3, "duration of the timed window")
	fs.IntVar(&o.partitions, "partitions", 3, "produce: round-robin over partitions 0..N-1")
	fs.IntVar(&o.partition, "partition", 0, "txn: the partition written")
	fs.IntVar(&o.perTxn, "per-txn", 10, "txn: records per transaction")
	fs.IntVar(&o.chunk, "chunk", 1000, "produce: records sent to one partition before the next")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a Go CPU profile of the run to this file")
	fs.StringVar(&o.logLevel, "log", "", "franz-go's log on stderr: error, warn, info or debug")
	_ = fs.Parse(os.Args[2:])
	if os.Getenv("GOGC") == "" {
		// Fewer GC cycles: at 100 B values GOGC=400 cost ~25 % less CPU per GB than the default
		// 100 (GOGC=off more: every new heap page is a page fault, which is slow on this VM).
		debug.SetGCPercent(400)
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			fail("cpuprofile: %v", err)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if o.bootstrap == "" || o.topic == "" || o.size < 0 || o.chunk < 1 || o.perTxn < 1 {
		fail("--bootstrap and --topic are required; --size >= 0, --chunk and --per-txn >= 1")
	}
	switch mode {
	case "produce":
		produce(o)
	case "txn":
		txn(o)
	}
}
