// Integration-test driver: the stock Java client (kafka-clients) as a transactional producer
// (and an assign()-only read_committed / read_uncommitted consumer, which needs no group).
//
//   java -cp <classes>:<jars> TxnDriver MODE BOOTSTRAP TOPIC ARGS...
//
// Modes (each prints exactly one JSON line on stdout, prefixed "RESULT "; diagnostics go to stderr):
//
//   commit-abort BOOTSTRAP TOPIC PARTITIONS PER_PARTITION TXN_ID
//       One producer, three transactions over every partition: commit, abort, commit. Each
//       transaction k sends PER_PARTITION records to each partition p (key "t<k>-p<p>-<i>",
//       value = key + "|" + padding), flushes and ends. Then two consumers (assign() +
//       seekToBeginning, no group) read every partition up to endOffsets() with
//       isolation.level read_committed and read_uncommitted.
//       RESULT {"sent": [[k, p, i, offset], ...], "read_committed": [[p, offset, value], ...],
//               "read_uncommitted": [...], "errors": [...]}
//
//   fence BOOTSTRAP TOPIC TXN_ID
//       Producer A: initTransactions, beginTransaction, send "zombie-0" (partition 0) and
//       "zombie-1" (partition 1), each acknowledged. Producer B (same transactional.id):
//       initTransactions. Then A's next call, commitTransaction(), must fail fenced; B sends
//       "successor-0" (partition 0) and commits.
//       RESULT {"a_sent": [[p, offset], ...], "a_commit_error": "<class>: <message>" | null,
//               "a_commit_error_cause": ..., "b_sent": [[p, offset]], "b_committed": bool, "errors": [...]}
//
//   timeout BOOTSTRAP TOPIC TXN_ID TXN_TIMEOUT_MS STALL_MS
//       Producer A (transaction.timeout.ms=TXN_TIMEOUT_MS): begin, send "stalled-0" (partition 0)
//       acknowledged, sleep STALL_MS, commitTransaction() -> expected to fail fenced (the
//       coordinator aborted the transaction with an epoch bump). Then producer B with the same
//       transactional.id: init, send "after-timeout-0", commit.
//       RESULT {"a_sent": [[p, offset]], "a_commit_error": ..., "a_commit_error_cause": ...,
//               "b_sent": [[p, offset]], "b_committed": bool, "errors": [...]}
//
//   read BOOTSTRAP TOPIC PARTITIONS ISOLATION START LINGER_MS
//       A consumer (assign(), no group) with isolation.level ISOLATION reads every partition from
//       offset START (-1: the beginning) up to endOffsets() — the last stable offset for
//       read_committed — then polls LINGER_MS more, so records past endOffsets() would show too.
//       RESULT {"end_offsets": [[p, offset], ...], "records": [[p, offset, value], ...], "errors": [...]}
//
//   crash-commit BOOTSTRAP TOPIC PARTITIONS PER_PARTITION TXN_ID
//       init, begin, send PER_PARTITION records "java-crashing-p<p>-<i>|" to every partition (all
//       acknowledged), print "SENT", then commitTransaction() — the test's broker crashes during
//       EndTxn and is restarted — retried after a TimeoutException (at most 3 calls); once
//       committed, one more transaction "java-after-p<p>-<i>|" is sent and committed.
//       RESULT {"committed": bool, "commit_errors": [...], "after_committed": bool, "errors": [...]}
//
//   dumplog BOOTSTRAP TOPIC TXN_ID_1 TXN_ID_2
//       The seeds' kafka-dump-log scenario (partition 0, key "thisIsMessageKey"):
//       producer (TXN_ID_1): init, begin, send "thisIsMessageValue1" .get();
//       producer2 (TXN_ID_2): init, begin, send "thisIsMessageValue2" .get(), commit.
//       producer2 is closed; producer is force-closed (close(Duration.ZERO): no abort is sent).
//       RESULT {"sent": [["thisIsMessageValue1", offset], ["thisIsMessageValue2", offset]],
//               "b_committed": bool, "errors": [...]}
//
// Exit code 0 when the mode ran to its end (the JSON says what happened), 1 on an unexpected failure.

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnDriver {
    private static final long SEND_TIMEOUT_S = 30;
    private static final List<String> ERRORS = new ArrayList<>();

    // -- tiny JSON writer ----------------------------------------------------------------
    static String q(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        return sb.append('"').toString();
    }

    static String errorsJson() {
        List<String> out = new ArrayList<>();
        synchronized (ERRORS) {
            for (String e : ERRORS) {
                out.add(q(e));
            }
        }
        return "[" + String.join(", ", out) + "]";
    }

    static String describe(Throwable t) {
        return t == null ? null : t.getClass().getName() + ": " + t.getMessage();
    }

    static void result(String json) {
        System.out.println("RESULT " + json);
        System.out.flush();
    }

    // -- clients -------------------------------------------------------------------------
    /** Client settings from TXN_DRIVER_CLIENT_PROPS ("key=value,key=value"), e.g. TLS, on top of the defaults. */
    static Properties withExtra(Properties props) {
        String extra = System.getenv("TXN_DRIVER_CLIENT_PROPS");
        if (extra != null) {
            for (String kv : extra.split(",")) {
                int eq = kv.indexOf('=');
                if (eq > 0) props.put(kv.substring(0, eq).trim(), kv.substring(eq + 1).trim());
            }
        }
        return props;
    }

    static KafkaProducer<String, String> producer(String bootstrap, String txnId, Integer txnTimeoutMs) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "it-java-txn-" + txnId);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        props.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        props.put(ProducerConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "500");
        props.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, "50");
        props.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        if (txnTimeoutMs != null) {
            props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, Integer.toString(txnTimeoutMs));
        }
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(withExtra(props));
    }

    static RecordMetadata sendSync(KafkaProducer<String, String> p, String topic, int partition, String key,
                                   String value) throws Exception {
        return p.send(new ProducerRecord<>(topic, partition, key, value)).get(SEND_TIMEOUT_S, TimeUnit.SECONDS);
    }

    /** Every record of every partition from the beginning up to endOffsets() (isolation-aware). */
    static List<String> consumeAll(String bootstrap, String topic, int partitions, String isolation) {
        return consume(bootstrap, topic, partitions, isolation, -1, 0, null);
    }

    /**
     * Records of every partition from START (-1: the beginning) up to endOffsets() (isolation-aware),
     * then LINGER_MS more of polling (so records past endOffsets() would show); ends → endsOut.
     */
    static List<String> consume(String bootstrap, String topic, int partitions, String isolation, long start,
                                long lingerMs, Map<TopicPartition, Long> endsOut) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "it-java-txn-reader-" + isolation);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<String> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(withExtra(props))) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            c.assign(tps);
            if (start < 0) {
                c.seekToBeginning(tps);
            } else {
                for (TopicPartition tp : tps) {
                    c.seek(tp, start);
                }
            }
            Map<TopicPartition, Long> ends = c.endOffsets(tps, Duration.ofSeconds(20));
            if (endsOut != null) {
                endsOut.putAll(ends);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            for (int round = 0; round < 600; round++) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp, Duration.ofSeconds(20)) < Math.max(ends.get(tp), start)) {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    synchronized (ERRORS) {
                        ERRORS.add(isolation + ": positions did not reach endOffsets " + ends + " within 30 s");
                    }
                    break;
                }
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : recs) {
                    out.add("[" + r.partition() + ", " + r.offset() + ", " + q(r.value()) + "]");
                }
            }
            long lingerEnd = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(lingerMs);
            for (int round = 0; round < 1000 && System.nanoTime() < lingerEnd; round++) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                    out.add("[" + r.partition() + ", " + r.offset() + ", " + q(r.value()) + "]");
                }
            }
        } catch (Exception e) {
            synchronized (ERRORS) {
                ERRORS.add(isolation + " consumer: " + describe(e));
            }
        }
        return out;
    }

    // -- modes -----------------------------------------------------------------------------
    static void commitAbort(String bootstrap, String topic, int partitions, int perPartition, String txnId)
            throws Exception {
        List<String> sent = new ArrayList<>();
        try (KafkaProducer<String, String> p = producer(bootstrap, txnId, null)) {
            p.initTransactions();
            for (int k = 0; k < 3; k++) {
                p.beginTransaction();
                List<java.util.concurrent.Future<RecordMetadata>> futures = new ArrayList<>();
                List<int[]> ids = new ArrayList<>();
                for (int part = 0; part < partitions; part++) {
                    for (int i = 0; i < perPartition; i++) {
                        String key = "t" + k + "-p" + part + "-" + i;
                        String value = key + "|" + "x".repeat((i * 37 + k * 11) % 300);
                        futures.add(p.send(new ProducerRecord<>(topic, part, key, value)));
                        ids.add(new int[] {k, part, i});
                    }
                }
                p.flush();
                for (int j = 0; j < futures.size(); j++) {
                    RecordMetadata md = futures.get(j).get(SEND_TIMEOUT_S, TimeUnit.SECONDS);
                    int[] id = ids.get(j);
                    sent.add("[" + id[0] + ", " + id[1] + ", " + id[2] + ", " + md.offset() + "]");
                }
                if (k == 1) {
                    p.abortTransaction();
                } else {
                    p.commitTransaction();
                }
            }
        }
        List<String> rc = consumeAll(bootstrap, topic, partitions, "read_committed");
        List<String> ru = consumeAll(bootstrap, topic, partitions, "read_uncommitted");
        result("{\"sent\": [" + String.join(", ", sent) + "], \"read_committed\": [" + String.join(", ", rc)
                + "], \"read_uncommitted\": [" + String.join(", ", ru) + "], \"errors\": " + errorsJson() + "}");
    }

    static String md(RecordMetadata m) {
        return "[" + m.partition() + ", " + m.offset() + "]";
    }

    /** A's commit fails (expected: fenced); B, same transactional.id, commits one record. */
    static void fenceOrTimeout(String mode, String bootstrap, String topic, String txnId, Integer timeoutMs,
                               long stallMs) throws Exception {
        List<String> aSent = new ArrayList<>();
        List<String> bSent = new ArrayList<>();
        String aError = null;
        String aCause = null;
        boolean bCommitted = false;
        KafkaProducer<String, String> a = producer(bootstrap, txnId, timeoutMs);
        KafkaProducer<String, String> b = null;
        try {
            a.initTransactions();
            a.beginTransaction();
            if (mode.equals("fence")) {
                aSent.add(md(sendSync(a, topic, 0, "zombie", "zombie-0")));
                aSent.add(md(sendSync(a, topic, 1, "zombie", "zombie-1")));
                b = producer(bootstrap, txnId, null);
                b.initTransactions();
            } else {
                aSent.add(md(sendSync(a, topic, 0, "stalled", "stalled-0")));
                Thread.sleep(stallMs);
            }
            try {
                a.commitTransaction();
            } catch (Exception e) {
                aError = describe(e);
                aCause = describe(e.getCause());
            }
            if (b == null) {
                b = producer(bootstrap, txnId, timeoutMs);
                b.initTransactions();
            }
            b.beginTransaction();
            String v = mode.equals("fence") ? "successor-0" : "after-timeout-0";
            bSent.add(md(sendSync(b, topic, 0, "next", v)));
            b.commitTransaction();
            bCommitted = true;
        } catch (Exception e) {
            synchronized (ERRORS) {
                ERRORS.add(describe(e));
            }
        } finally {
            a.close(Duration.ZERO);
            if (b != null) {
                b.close(Duration.ofSeconds(5));
            }
        }
        result("{\"a_sent\": [" + String.join(", ", aSent) + "], \"a_commit_error\": " + q(aError)
                + ", \"a_commit_error_cause\": " + q(aCause) + ", \"b_sent\": [" + String.join(", ", bSent)
                + "], \"b_committed\": " + bCommitted + ", \"errors\": " + errorsJson() + "}");
    }

    /** Commit across a broker crash (the broker kills itself during EndTxn and is restarted). */
    static void crashCommit(String bootstrap, String topic, int partitions, int perPartition, String txnId)
            throws Exception {
        List<String> commitErrors = new ArrayList<>();
        boolean committed = false;
        boolean afterCommitted = false;
        try (KafkaProducer<String, String> p = producer(bootstrap, txnId, null)) {
            p.initTransactions();
            p.beginTransaction();
            List<java.util.concurrent.Future<RecordMetadata>> futures = new ArrayList<>();
            for (int part = 0; part < partitions; part++) {
                for (int i = 0; i < perPartition; i++) {
                    String v = "java-crashing-p" + part + "-" + i + "|";
                    futures.add(p.send(new ProducerRecord<>(topic, part, v, v)));
                }
            }
            for (java.util.concurrent.Future<RecordMetadata> f : futures) {
                f.get(SEND_TIMEOUT_S, TimeUnit.SECONDS);
            }
            System.out.println("SENT");
            System.out.flush();
            // commitTransaction() blocks up to max.block.ms; after a TimeoutException the same
            // call may be retried (bounded here).
            for (int attempt = 0; attempt < 3 && !committed; attempt++) {
                try {
                    p.commitTransaction();
                    committed = true;
                } catch (org.apache.kafka.common.errors.TimeoutException e) {
                    commitErrors.add(describe(e));
                }
            }
            if (committed) {
                p.beginTransaction();
                for (int part = 0; part < partitions; part++) {
                    for (int i = 0; i < perPartition; i++) {
                        String v = "java-after-p" + part + "-" + i + "|";
                        sendSync(p, topic, part, v, v);
                    }
                }
                p.commitTransaction();
                afterCommitted = true;
            }
        } catch (Exception e) {
            synchronized (ERRORS) {
                ERRORS.add(describe(e));
            }
        }
        List<String> ce = new ArrayList<>();
        for (String e : commitErrors) {
            ce.add(q(e));
        }
        result("{\"committed\": " + committed + ", \"commit_errors\": [" + String.join(", ", ce)
                + "], \"after_committed\": " + afterCommitted + ", \"errors\": " + errorsJson() + "}");
    }

    static void dumplog(String bootstrap, String topic, String txnId1, String txnId2) throws Exception {
        List<String> sent = new ArrayList<>();
        boolean committed = false;
        KafkaProducer<String, String> producer = producer(bootstrap, txnId1, null);
        KafkaProducer<String, String> producer2 = null;
        try {
            producer.initTransactions();
            producer.beginTransaction();
            RecordMetadata m1 = sendSync(producer, topic, 0, "thisIsMessageKey", "thisIsMessageValue1");
            sent.add("[\"thisIsMessageValue1\", " + m1.offset() + "]");
            producer2 = producer(bootstrap, txnId2, null);
            producer2.initTransactions();
            producer2.beginTransaction();
            RecordMetadata m2 = sendSync(producer2, topic, 0, "thisIsMessageKey", "thisIsMessageValue2");
            sent.add("[\"thisIsMessageValue2\", " + m2.offset() + "]");
            producer2.commitTransaction();
            committed = true;
        } catch (Exception e) {
            synchronized (ERRORS) {
                ERRORS.add(describe(e));
            }
        } finally {
            if (producer2 != null) {
                producer2.close(Duration.ofSeconds(5));
            }
            producer.close(Duration.ZERO);  // force close: no EndTxn(abort) for its open transaction
        }
        result("{\"sent\": [" + String.join(", ", sent) + "], \"b_committed\": " + committed
                + ", \"errors\": " + errorsJson() + "}");
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: TxnDriver commit-abort|fence|timeout|read|crash-commit|dumplog BOOTSTRAP TOPIC ...");
            System.exit(2);
        }
        String mode = args[0];
        String bootstrap = args[1];
        String topic = args[2];
        try {
            switch (mode) {
                case "commit-abort":
                    commitAbort(bootstrap, topic, Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5]);
                    break;
                case "fence":
                    fenceOrTimeout(mode, bootstrap, topic, args[3], null, 0);
                    break;
                case "timeout":
                    fenceOrTimeout(mode, bootstrap, topic, args[3], Integer.parseInt(args[4]),
                            Long.parseLong(args[5]));
                    break;
                case "read": {
                    Map<TopicPartition, Long> ends = new java.util.TreeMap<>(
                            java.util.Comparator.comparingInt(TopicPartition::partition));
                    List<String> recs = consume(bootstrap, topic, Integer.parseInt(args[3]), args[4],
                            Long.parseLong(args[5]), Long.parseLong(args[6]), ends);
                    List<String> endList = new ArrayList<>();
                    for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
                        endList.add("[" + e.getKey().partition() + ", " + e.getValue() + "]");
                    }
                    result("{\"end_offsets\": [" + String.join(", ", endList) + "], \"records\": ["
                            + String.join(", ", recs) + "], \"errors\": " + errorsJson() + "}");
                    break;
                }
                case "crash-commit":
                    crashCommit(bootstrap, topic, Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5]);
                    break;
                case "dumplog":
                    dumplog(bootstrap, topic, args[3], args[4]);
                    break;
                default:
                    System.err.println("unknown mode " + mode);
                    System.exit(2);
            }
        } catch (Exception e) {
            e.printStackTrace();
            result("{\"fatal\": " + q(describe(e)) + ", \"errors\": " + errorsJson() + "}");
            System.exit(1);
        }
        System.exit(0);
    }
}
