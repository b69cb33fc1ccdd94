// The exactly-once scenarios every Java client since 0.11 must run against minibroker
// (tests/integration/test_java_matrix.py). Compiled once against kafka-clients 0.11.0.3, the
// oldest API; the calls that changed since are made by reflection, so the same class runs with
// every release up to the newest:
//   sendOffsetsToTransaction(Map, ConsumerGroupMetadata) from 2.5 (KIP-447), (Map, String) before
//   and removed in 4.0; poll(Duration) from 2.0, poll(long) before and removed in 4.0.
//
//   java -cp <classes>:<kafka-clients X>:<slf4j> MatrixDriver BOOTSTRAP PREFIX X
//
// Topics PREFIX-idem, PREFIX-txn, PREFIX-fence, PREFIX-in (filled by the test), PREFIX-out exist.
// Prints one JSON line per scenario; exit 0 when every scenario ran (the test checks the data).

import java.lang.reflect.Method;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class MatrixDriver {
    static String bootstrap, prefix, release;

    static KafkaProducer<byte[], byte[]> producer(String transactionalId, boolean idempotent) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("enable.idempotence", String.valueOf(idempotent || transactionalId != null));
        // 0.11 allows idempotence with one request in flight only; 1.0 and later with up to 5
        p.put("max.in.flight.requests.per.connection", release.startsWith("0.11") ? "1" : "5");
        p.put("retries", "2147483647");
        p.put("request.timeout.ms", "15000");
        p.put("max.block.ms", "30000");
        if (transactionalId != null) {
            p.put("transactional.id", transactionalId);
            p.put("transaction.timeout.ms", "30000");
        }
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    static byte[] b(String s) { return s.getBytes(java.nio.charset.StandardCharsets.UTF_8); }

    static void send(KafkaProducer<byte[], byte[]> p, String topic, String value) throws Exception {
        p.send(new ProducerRecord<>(topic, 0, b(value), b(value))).get(30, TimeUnit.SECONDS);
    }

    @SuppressWarnings("unchecked")
    static ConsumerRecords<byte[], byte[]> poll(KafkaConsumer<byte[], byte[]> c, long ms) throws Exception {
        try {
            Method m = KafkaConsumer.class.getMethod("poll", java.time.Duration.class);
            return (ConsumerRecords<byte[], byte[]>) m.invoke(c, java.time.Duration.ofMillis(ms));
        } catch (NoSuchMethodException e) {
            Method m = KafkaConsumer.class.getMethod("poll", long.class);
            return (ConsumerRecords<byte[], byte[]>) m.invoke(c, ms);
        }
    }

    static void sendOffsets(KafkaProducer<byte[], byte[]> p, KafkaConsumer<byte[], byte[]> c,
                            Map<TopicPartition, OffsetAndMetadata> offsets, String group) throws Exception {
        try {
            Object metadata = KafkaConsumer.class.getMethod("groupMetadata").invoke(c);
            Method m = KafkaProducer.class.getMethod("sendOffsetsToTransaction", Map.class, metadata.getClass());
            m.invoke(p, offsets, metadata);
        } catch (NoSuchMethodException e) {
            KafkaProducer.class.getMethod("sendOffsetsToTransaction", Map.class, String.class).invoke(p, offsets, group);
        }
    }

    static String rootCause(Throwable t) {
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t.getClass().getSimpleName();
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        prefix = args[1];
        release = args[2];

        // idempotent producer
        try (KafkaProducer<byte[], byte[]> p = producer(null, true)) {
            for (int i = 0; i < 200; i++) {
                p.send(new ProducerRecord<>(prefix + "-idem", 0, b("i-" + i), b("i-" + i)));
            }
            p.flush();
        }
        System.out.println("{\"scenario\": \"idempotent\", \"sent\": 200}");

        // commit, abort, commit
        try (KafkaProducer<byte[], byte[]> p = producer(prefix + "-tx", false)) {
            p.initTransactions();
            for (String kind : new String[] {"c1", "a", "c2"}) {
                p.beginTransaction();
                for (int i = 0; i < 50; i++) {
                    send(p, prefix + "-txn", kind + "-" + i);
                }
                if (kind.equals("a")) {
                    p.abortTransaction();
                } else {
                    p.commitTransaction();
                }
            }
        }
        System.out.println("{\"scenario\": \"commit-abort\"}");

        // fencing: a second instance with the same transactional.id fences the first
        String fenced = "none";
        KafkaProducer<byte[], byte[]> zombie = producer(prefix + "-fence-tx", false);
        zombie.initTransactions();
        zombie.beginTransaction();
        for (int i = 0; i < 10; i++) {
            send(zombie, prefix + "-fence", "zombie-" + i);
        }
        try (KafkaProducer<byte[], byte[]> next = producer(prefix + "-fence-tx", false)) {
            next.initTransactions();
            try {
                zombie.commitTransaction();
            } catch (Exception e) {
                fenced = rootCause(e);
            }
            next.beginTransaction();
            for (int i = 0; i < 10; i++) {
                send(next, prefix + "-fence", "next-" + i);
            }
            next.commitTransaction();
        }
        try {
            zombie.close();
        } catch (Exception e) {
            // a fenced producer may refuse to close cleanly
        }
        System.out.println("{\"scenario\": \"fencing\", \"zombie_commit\": \"" + fenced + "\"}");

        // consume-transform-produce with the offsets in the transaction
        String group = prefix + "-ctp";
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", group);
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        cp.put("isolation.level", "read_committed");
        int moved = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer());
             KafkaProducer<byte[], byte[]> p = producer(prefix + "-ctp-tx", false)) {
            c.subscribe(Collections.singletonList(prefix + "-in"));
            p.initTransactions();
            long deadline = System.currentTimeMillis() + 60000;
            while (moved < 100 && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = poll(c, 200);
                if (records.isEmpty()) {
                    continue;
                }
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    String v = new String(r.value(), java.nio.charset.StandardCharsets.UTF_8);
                    p.send(new ProducerRecord<>(prefix + "-out", 0, r.key(), b(v.toUpperCase())));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    moved++;
                }
                sendOffsets(p, c, offsets, group);
                p.commitTransaction();
            }
        }
        System.out.println("{\"scenario\": \"consume-transform-produce\", \"moved\": " + moved + "}");
    }
}
