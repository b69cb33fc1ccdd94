// The client scenarios with kafka-clients 4.x; the same steps as ../rdkafka_scenarios.py.
//
//   java -cp <classes>:<jars> ClientScenarios MODE ARGS...
//
//   idempotent BOOTSTRAP TOPIC PARTITIONS PER_PARTITION PACE_MS REQUEST_TIMEOUT_MS
//   commit-abort BOOTSTRAP TOPIC PARTITIONS PER_TXN TXN_ID
//   fence BOOTSTRAP TOPIC TXN_ID
//   fence-timed-out BOOTSTRAP TOPIC TXN_ID DELIVERY_TIMEOUT_MS
//   timeout BOOTSTRAP TOPIC TXN_ID TIMEOUT_MS IDLE_MS
//   ctp BOOTSTRAP IN_TOPIC OUT_TOPIC PARTITIONS GROUP TXN_ID INSTANCE_ID CRASH_AFTER
//
// Each prints one line "RESULT {json}": "steps" maps a step label to the error the client raised
// (null: it succeeded) as the exception's simple class name, "/" and its cause's when it has one
// (messages are free text and differ between brokers); "records" the [partition, offset, value]
// each isolation level reads; "committed" the group's offsets (ctp); "unexpected" the rest.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class ClientScenarios {
    private static final long SEND_TIMEOUT_S = 30;
    private static final long READ_TIMEOUT_S = 30;
    // After printing PAUSE-ME: time for the harness to stop the broker before the next request.
    private static final long PAUSE_GRACE_MS = 500;
    private static final long SETTLE_MS = 500;
    private static final List<String> UNEXPECTED = Collections.synchronizedList(new ArrayList<>());

    // -- tiny JSON writer --------------------------------------------------------------------
    static String q(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    static String strings(List<String> xs) {
        List<String> out = new ArrayList<>();
        for (String x : xs) {
            out.add(q(x));
        }
        return "[" + String.join(", ", out) + "]";
    }

    static String stepsJson(Map<String, String> steps) {
        List<String> out = new ArrayList<>();
        for (Map.Entry<String, String> e : steps.entrySet()) {
            out.add(q(e.getKey()) + ": " + q(e.getValue()));
        }
        return "{" + String.join(", ", out) + "}";
    }

    static String name(Throwable t) {
        if (t instanceof ExecutionException && t.getCause() != null) {
            t = t.getCause();
        }
        String n = t.getClass().getSimpleName();
        return t.getCause() == null ? n : n + "/" + t.getCause().getClass().getSimpleName();
    }

    interface Step {
        void run() throws Exception;
    }

    static void step(Map<String, String> steps, String label, Step s) {
        try {
            s.run();
            steps.put(label, null);
        } catch (Exception e) {
            steps.put(label, name(e));
        }
    }

    // -- clients -----------------------------------------------------------------------------
    static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "10000");
        p.put("retry.backoff.ms", "50");
        p.put("retry.backoff.max.ms", "500");
        p.put("reconnect.backoff.ms", "50");
        p.put("reconnect.backoff.max.ms", "500");
        return p;
    }

    static KafkaProducer<String, String> producer(String bootstrap, String txnId, Map<String, String> extra) {
        Properties p = common(bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        if (txnId != null) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        }
        p.putAll(extra);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        return producer(bootstrap, txnId, Map.of());
    }

    /** One record, waited for: the error name, null when it was written. */
    static String sendSync(KafkaProducer<String, String> p, String topic, int partition, String value) {
        try {
            p.send(new ProducerRecord<>(topic, partition, "k", value)).get(SEND_TIMEOUT_S, TimeUnit.SECONDS);
            return null;
        } catch (Exception e) {
            return name(e);
        }
    }

    static KafkaConsumer<String, String> consumer(Properties p) {
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    /** Every record of TOPIC from the beginning up to endOffsets() (the LSO under read_committed). */
    static String read(String bootstrap, String topic, int partitions, String isolation) {
        Properties props = common(bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        List<String> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = consumer(props)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = c.endOffsets(tps, Duration.ofSeconds(20));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(READ_TIMEOUT_S);
            for (int round = 0; round < 2000; round++) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp, Duration.ofSeconds(20)) < ends.get(tp)) {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    UNEXPECTED.add(isolation + ": positions did not reach " + ends + " in " + READ_TIMEOUT_S + " s");
                    break;
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    out.add("[" + r.partition() + ", " + r.offset() + ", " + q(r.value()) + "]");
                }
            }
        } catch (Exception e) {
            UNEXPECTED.add(isolation + " consumer: " + name(e));
        }
        return "[" + String.join(", ", out) + "]";
    }

    static String readBoth(String bootstrap, String topic, int partitions) {
        return "{\"read_committed\": " + read(bootstrap, topic, partitions, "read_committed")
                + ", \"read_uncommitted\": " + read(bootstrap, topic, partitions, "read_uncommitted") + "}";
    }

    static void result(Map<String, String> steps, String records, String extra) {
        System.out.println("RESULT {\"steps\": " + stepsJson(steps) + ", \"records\": " + records + extra
                + ", \"unexpected\": " + strings(new ArrayList<>(UNEXPECTED)) + "}");
        System.out.flush();
    }

    // -- scenarios ---------------------------------------------------------------------------
    /** One-record batches, five in flight, paced; "PRODUCING" once the first one is acknowledged. */
    static void idempotent(String bootstrap, String topic, int partitions, int perPartition, long paceMs,
                           int requestTimeoutMs) throws InterruptedException {
        Map<String, String> steps = new TreeMap<>();
        Set<String> errors = new java.util.TreeSet<>();
        java.util.concurrent.atomic.AtomicInteger acked = new java.util.concurrent.atomic.AtomicInteger();
        double retries = 0;
        // batch.size 1: every record is its own batch, so five batches are in flight at once.
        try (KafkaProducer<String, String> p = producer(bootstrap, null, Map.of(
                "max.in.flight.requests.per.connection", "5", "linger.ms", "0", "batch.size", "1",
                "retries", "1000", "request.timeout.ms", Integer.toString(requestTimeoutMs),
                "delivery.timeout.ms", "60000"))) {
            boolean announced = false;
            for (int i = 0; i < perPartition; i++) {
                for (int part = 0; part < partitions; part++) {
                    p.send(new ProducerRecord<>(topic, part, null, "p" + part + "-" + i), (md, e) -> {
                        if (e != null) {
                            synchronized (errors) {
                                errors.add(name(e));
                            }
                        } else {
                            acked.incrementAndGet();
                        }
                    });
                }
                Thread.sleep(paceMs);
                if (!announced && acked.get() > 0) {
                    System.out.println("PRODUCING");
                    System.out.flush();
                    announced = true;
                }
            }
            if (!announced) {  // the harness waits for it either way
                System.out.println("PRODUCING");
                System.out.flush();
            }
            p.flush();
            for (Map.Entry<org.apache.kafka.common.MetricName, ? extends org.apache.kafka.common.Metric> m
                    : p.metrics().entrySet()) {
                if (m.getKey().name().equals("record-retry-total") && m.getKey().group().equals("producer-metrics")) {
                    retries = ((Number) m.getValue().metricValue()).doubleValue();
                }
            }
        }
        synchronized (errors) {
            steps.put("deliveries", errors.isEmpty() ? null : String.join(",", errors));
        }
        steps.put("unflushed", null);
        result(steps, readBoth(bootstrap, topic, partitions), ", \"retries\": " + (long) retries);
    }

    static void commitAbort(String bootstrap, String topic, int partitions, int perTxn, String txnId) {
        Map<String, String> steps = new TreeMap<>();
        try (KafkaProducer<String, String> p = producer(bootstrap, txnId)) {
            step(steps, "init", p::initTransactions);
            for (int k = 0; k < 4; k++) {
                step(steps, "begin-" + k, p::beginTransaction);
                for (int part = 0; part < partitions; part++) {
                    for (int i = 0; i < perTxn; i++) {
                        p.send(new ProducerRecord<>(topic, part, null, "t" + k + "-p" + part + "-" + i));
                    }
                }
                // Both clients drop records still queued when a transaction aborts: flushed first,
                // what reaches the broker does not depend on timing.
                p.flush();
                steps.put("flush-" + k, null);
                if (k % 2 == 0) {
                    step(steps, "commit-" + k, p::commitTransaction);
                } else {
                    step(steps, "abort-" + k, p::abortTransaction);
                }
            }
        }
        result(steps, readBoth(bootstrap, topic, partitions), "");
    }

    static void fence(String bootstrap, String topic, String txnId) {
        Map<String, String> steps = new TreeMap<>();
        KafkaProducer<String, String> a = producer(bootstrap, txnId);
        KafkaProducer<String, String> b = producer(bootstrap, txnId);
        try {
            step(steps, "a-init", a::initTransactions);
            step(steps, "a-begin", a::beginTransaction);
            steps.put("a-send-0", sendSync(a, topic, 0, "a-0"));
            steps.put("a-send-1", sendSync(a, topic, 1, "a-1"));
            step(steps, "b-init", b::initTransactions);
            steps.put("a-send-after-fence", sendSync(a, topic, 0, "a-2"));
            step(steps, "a-commit", a::commitTransaction);
            step(steps, "a-abort", a::abortTransaction);
            step(steps, "b-begin", b::beginTransaction);
            steps.put("b-send", sendSync(b, topic, 0, "b-0"));
            step(steps, "b-commit", b::commitTransaction);
        } finally {
            a.close(Duration.ZERO);
            b.close(Duration.ofSeconds(5));
        }
        result(steps, readBoth(bootstrap, topic, 2), "");
    }

    /**
     * A writes; B (same transactional.id) inits; A's next batch times out in the client (the broker
     * is paused after "PAUSE-ME"): an abortable error, not the one a refused batch gives; then A
     * commits and aborts (EndTxn with its old epoch) and B commits.
     */
    static void fenceTimedOut(String bootstrap, String topic, String txnId, int deliveryTimeoutMs)
            throws InterruptedException {
        Map<String, String> steps = new TreeMap<>();
        // One attempt only: the batch expires in flight, not between a timed-out request and its
        // retry, where the client's error would depend on timing.
        int requestTimeoutMs = deliveryTimeoutMs;
        KafkaProducer<String, String> a = producer(bootstrap, txnId, Map.of(
                "delivery.timeout.ms", Integer.toString(deliveryTimeoutMs),
                "request.timeout.ms", Integer.toString(requestTimeoutMs), "linger.ms", "0"));
        KafkaProducer<String, String> b = producer(bootstrap, txnId);
        try {
            step(steps, "a-init", a::initTransactions);
            step(steps, "a-begin", a::beginTransaction);
            steps.put("a-send-0", sendSync(a, topic, 0, "a-0"));
            step(steps, "b-init", b::initTransactions);
            System.out.println("PAUSE-ME");
            System.out.flush();
            Thread.sleep(PAUSE_GRACE_MS);  // the harness stops the broker now
            steps.put("a-send-paused", sendSync(a, topic, 0, "a-1"));
            // The batch's future fails before the client has moved to its abortable state; a
            // commit in between would raise another exception than one after it.
            Thread.sleep(SETTLE_MS);
            step(steps, "a-commit", a::commitTransaction);
            step(steps, "a-abort", a::abortTransaction);
            step(steps, "b-begin", b::beginTransaction);
            steps.put("b-send", sendSync(b, topic, 0, "b-0"));
            step(steps, "b-commit", b::commitTransaction);
        } finally {
            a.close(Duration.ZERO);
            b.close(Duration.ofSeconds(5));
        }
        result(steps, readBoth(bootstrap, topic, 1), "");
    }

    static void timeout(String bootstrap, String topic, String txnId, int timeoutMs, long idleMs)
            throws InterruptedException {
        Map<String, String> steps = new TreeMap<>();
        KafkaProducer<String, String> a = producer(bootstrap, txnId,
                Map.of("transaction.timeout.ms", Integer.toString(timeoutMs),
                       "delivery.timeout.ms", Integer.toString(timeoutMs),
                       "request.timeout.ms", Integer.toString(timeoutMs), "linger.ms", "0"));
        KafkaProducer<String, String> b = null;
        try {
            step(steps, "a-init", a::initTransactions);
            step(steps, "a-begin", a::beginTransaction);
            steps.put("a-send", sendSync(a, topic, 0, "a-0"));
            Thread.sleep(idleMs);
            step(steps, "a-commit", a::commitTransaction);
            step(steps, "a-abort", a::abortTransaction);
            b = producer(bootstrap, txnId);
            KafkaProducer<String, String> bb = b;
            step(steps, "b-init", bb::initTransactions);
            step(steps, "b-begin", bb::beginTransaction);
            steps.put("b-send", sendSync(b, topic, 0, "b-0"));
            step(steps, "b-commit", bb::commitTransaction);
        } finally {
            a.close(Duration.ZERO);
            if (b != null) {
                b.close(Duration.ofSeconds(5));
            }
        }
        result(steps, readBoth(bootstrap, topic, 1), "");
    }

    static void ctp(String bootstrap, String inTopic, String outTopic, int partitions, String group, String txnId,
                    String instanceId, int crashAfter) throws InterruptedException {
        Map<String, String> steps = new TreeMap<>();
        int done = 0;
        String committed = "[]";
        KafkaProducer<String, String> p = producer(bootstrap, txnId);
        // Before the consumer fetches its offsets: InitProducerId ends the killed run's transaction,
        // whose offsets would otherwise keep the fetch unstable.
        step(steps, "init", p::initTransactions);
        Properties props = common(bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "20");
        try (KafkaConsumer<String, String> c = consumer(props)) {
            c.subscribe(List.of(inTopic));
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) {
                tps.add(new TopicPartition(inTopic, i));
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            boolean atEnd = false;
            for (int round = 0; round < 3000 && System.nanoTime() < deadline; round++) {
                ConsumerRecords<String, String> batch = c.poll(Duration.ofMillis(200));
                if (batch.isEmpty()) {
                    if (c.assignment().size() == partitions) {
                        Map<TopicPartition, Long> ends = c.endOffsets(tps, Duration.ofSeconds(20));
                        atEnd = true;
                        for (TopicPartition tp : tps) {
                            if (c.position(tp, Duration.ofSeconds(20)) < ends.get(tp)) {
                                atEnd = false;
                            }
                        }
                        if (atEnd) {
                            break;
                        }
                    }
                    continue;
                }
                p.beginTransaction();
                List<Future<?>> sent = new ArrayList<>();
                for (ConsumerRecord<String, String> r : batch) {
                    sent.add(p.send(new ProducerRecord<>(outTopic, r.partition(), null, "out-" + r.value())));
                }
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (TopicPartition tp : c.assignment()) {
                    offsets.put(tp, new OffsetAndMetadata(c.position(tp)));
                }
                p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                // Killed with the batch and its offsets in an open transaction.
                if (crashAfter >= 0 && done >= crashAfter) {
                    p.flush();
                    System.out.println("CRASHPOINT");
                    System.out.flush();
                    Thread.sleep(120_000);
                    UNEXPECTED.add("not killed at the crash point");
                    break;
                }
                p.commitTransaction();
                done += batch.count();
            }
            if (!atEnd) {
                UNEXPECTED.add("ctp: input end not reached");
            }
            Set<TopicPartition> all = new HashSet<>(tps);
            List<String> co = new ArrayList<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : c.committed(all, Duration.ofSeconds(20)).entrySet()) {
                co.add("[" + e.getKey().partition() + ", " + (e.getValue() == null ? -1001 : e.getValue().offset()) + "]");
            }
            Collections.sort(co);
            committed = "[" + String.join(", ", co) + "]";
        } catch (Exception e) {
            UNEXPECTED.add("ctp: " + name(e) + ": " + e.getMessage());
        } finally {
            p.close(Duration.ofSeconds(5));
        }
        result(steps, readBoth(bootstrap, outTopic, partitions),
                ", \"processed\": " + done + ", \"committed\": " + committed);
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "";
        try {
            switch (mode) {
                case "idempotent":
                    idempotent(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                               Long.parseLong(args[5]), Integer.parseInt(args[6]));
                    break;
                case "commit-abort":
                    commitAbort(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5]);
                    break;
                case "fence":
                    fence(args[1], args[2], args[3]);
                    break;
                case "fence-timed-out":
                    fenceTimedOut(args[1], args[2], args[3], Integer.parseInt(args[4]));
                    break;
                case "timeout":
                    timeout(args[1], args[2], args[3], Integer.parseInt(args[4]), Long.parseLong(args[5]));
                    break;
                case "ctp":
                    ctp(args[1], args[2], args[3], Integer.parseInt(args[4]), args[5], args[6], args[7],
                        Integer.parseInt(args[8]));
                    break;
                default:
                    System.err.println("usage: ClientScenarios idempotent|commit-abort|fence|fence-timed-out|timeout|ctp ARGS...");
                    System.exit(2);
            }
        } catch (Exception e) {
            UNEXPECTED.add(name(e) + ": " + e.getMessage());
            result(new TreeMap<>(), "{}", "");
        }
        System.exit(0);
    }
}
