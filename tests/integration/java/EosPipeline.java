// Integration-test driver: the exactly-once consume-transform-produce loop of
// examples/eos_pipeline.py, written with the stock Java client (kafka-clients).
//
//   java -cp <classes>:<jars> EosPipeline BOOTSTRAP INPUT OUTPUT GROUP TXN_ID IDLE_EXIT_SECONDS [BATCH_SIZE [GROUP_PROTOCOL]]
//
// GROUP_PROTOCOL is the consumer's group.protocol: classic (the default) or consumer (KIP-848, where the
// session timeout and heartbeat interval are the broker's, so the client may not set them).
//
// A KafkaConsumer (group GROUP, subscribe(INPUT), isolation.level=read_committed, no auto commit) and a
// transactional KafkaProducer (transactional.id TXN_ID). Per poll batch: beginTransaction, send every record
// to OUTPUT with its key and the value upper-cased, sendOffsetsToTransaction(positions of the assignment,
// consumer.groupMetadata()), commitTransaction. An abortable error aborts the transaction and seeks the
// batch's partitions back to the batch's first offsets; a fatal one (fenced, ...) exits with status 1.
// A rebalance that revokes partitions while a transaction is open aborts it.
//
// Stops cleanly (finishes the batch in hand, closes the consumer so it leaves the group, closes the
// producer) on SIGTERM/SIGINT, or after IDLE_EXIT_SECONDS without records while partitions are assigned
// (0: never) — a safety bound, so a forgotten JVM ends by itself.
//
// Progress goes to stdout, one line per event: "READY", "ASSIGNED <partitions>", "REVOKED <partitions>",
// "COMMITTED <txn number> <records> <total records>", "ABORTED <reason>", "EXIT <status> <why>".

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class EosPipeline {
    private final String input;
    private final String output;
    private final long idleExitMs;
    private final KafkaConsumer<String, String> consumer;
    private final KafkaProducer<String, String> producer;
    private volatile boolean running = true;
    private boolean inTxn = false;
    private long txns = 0;
    private long total = 0;

    static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    EosPipeline(String bootstrap, String input, String output, String group, String txnId, long idleExitMs,
                int batchSize, String groupProtocol) {
        this.input = input;
        this.output = output;
        this.idleExitMs = idleExitMs;

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "eos-pipeline-" + txnId);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(batchSize));
        cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, groupProtocol);
        if (groupProtocol.equals("classic")) {
            cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        }
        cp.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "30000");
        cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        cp.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        cp.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        cp.put(ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        cp.put(ConsumerConfig.RECONNECT_BACKOFF_MS_CONFIG, "50");
        cp.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        consumer = new KafkaConsumer<>(cp);

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.CLIENT_ID_CONFIG, "eos-pipeline-" + txnId);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "10000");
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        pp.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        pp.put(ProducerConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "500");
        pp.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, "50");
        pp.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        producer = new KafkaProducer<>(pp);
    }

    static String transform(String value) {
        return value == null ? null : value.toUpperCase(Locale.ROOT);
    }

    static String fmt(Collection<TopicPartition> tps) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : tps) {
            out.add(tp.topic() + "[" + tp.partition() + "]");
        }
        return out.isEmpty() ? "-" : String.join(",", out);
    }

    void abort(String why) {
        say("ABORTED " + why);
        try {
            producer.abortTransaction();
        } finally {
            inTxn = false;
        }
    }

    /** Returns the exit status: 0 after a clean stop, 1 after a fatal error. */
    int run() {
        // Fence any earlier instance of TXN_ID and abort its open transaction before joining the group:
        // until that is done its pending offset commit keeps the group's offsets unstable.
        producer.initTransactions();
        say("READY");
        consumer.subscribe(List.of(input), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                say("REVOKED " + fmt(partitions));
                if (inTxn) {
                    abort("revoked during a transaction");
                }
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                say("ASSIGNED " + fmt(partitions));
            }
        });
        long idleSince = System.nanoTime();
        for (long round = 0; running && round < 10_000_000L; round++) {
            ConsumerRecords<String, String> records;
            try {
                records = consumer.poll(Duration.ofMillis(200));
            } catch (WakeupException e) {
                break;  // SIGTERM: no transaction is open between batches
            }
            if (records.isEmpty()) {
                boolean assigned = !consumer.assignment().isEmpty();
                if (!assigned || idleExitMs <= 0) {
                    idleSince = System.nanoTime();
                } else if (System.nanoTime() - idleSince > TimeUnit.MILLISECONDS.toNanos(idleExitMs)) {
                    say("EXIT 0 idle");
                    return 0;
                }
                continue;
            }
            idleSince = System.nanoTime();
            Map<TopicPartition, Long> batchStart = new HashMap<>();
            for (TopicPartition tp : records.partitions()) {
                batchStart.put(tp, records.records(tp).get(0).offset());
            }
            try {
                producer.beginTransaction();
                inTxn = true;
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(output, r.key(), transform(r.value())));
                }
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (TopicPartition tp : consumer.assignment()) {
                    offsets.put(tp, new OffsetAndMetadata(consumer.position(tp)));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                commit();
                txns++;
                total += records.count();
                say("COMMITTED " + txns + " " + records.count() + " " + total);
            } catch (ProducerFencedException | FencedInstanceIdException | OutOfOrderSequenceException
                     | AuthorizationException | UnsupportedVersionException e) {
                System.err.println("fatal: " + e);
                say("EXIT 1 " + e.getClass().getSimpleName());
                return 1;
            } catch (WakeupException e) {
                // SIGTERM while the transaction was open (consumer.position()): abort it and stop.
                abort("wakeup");
                break;
            } catch (KafkaException e) {
                System.err.println("abortable: " + e);
                abort(e.getClass().getSimpleName());
                Collection<TopicPartition> assigned = consumer.assignment();
                for (Map.Entry<TopicPartition, Long> en : batchStart.entrySet()) {
                    if (assigned.contains(en.getKey())) {
                        consumer.seek(en.getKey(), en.getValue());
                    }
                }
            }
        }
        say("EXIT 0 stopped");
        return 0;
    }

    void commit() {
        for (int attempt = 1; ; attempt++) {
            try {
                producer.commitTransaction();
                inTxn = false;
                return;
            } catch (TimeoutException e) {
                if (attempt >= 3) {
                    throw e;
                }
                System.err.println("commitTransaction timed out, retrying: " + e);
            }
        }
    }

    void close() {
        try {
            if (inTxn) {
                abort("close");
            }
        } catch (KafkaException e) {
            System.err.println("abort on close: " + e);
        }
        try {
            consumer.close(Duration.ofSeconds(10));
        } catch (KafkaException e) {
            System.err.println("consumer close: " + e);
        }
        try {
            producer.close(Duration.ofSeconds(10));
        } catch (KafkaException e) {
            System.err.println("producer close: " + e);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 6) {
            System.err.println("usage: EosPipeline BOOTSTRAP INPUT OUTPUT GROUP TXN_ID IDLE_EXIT_SECONDS [BATCH_SIZE]");
            System.exit(2);
        }
        int batch = args.length > 6 ? Integer.parseInt(args[6]) : 500;
        EosPipeline p = new EosPipeline(args[0], args[1], args[2], args[3], args[4],
                                        (long) (Double.parseDouble(args[5]) * 1000), batch,
                                        args.length > 7 ? args[7] : "classic");
        CountDownLatch done = new CountDownLatch(1);
        Thread hook = new Thread(() -> {
            p.running = false;
            p.consumer.wakeup();
            try {
                done.await(20, TimeUnit.SECONDS);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        });
        Runtime.getRuntime().addShutdownHook(hook);
        int status;
        try {
            status = p.run();
        } catch (KafkaException e) {
            System.err.println("fatal: " + e);
            say("EXIT 1 " + e.getClass().getSimpleName());
            status = 1;
        } finally {
            p.close();
            done.countDown();
        }
        if (p.running) {  // not stopping on a signal: exit with our own status
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException ignored) {
                // already shutting down
            }
            System.exit(status);
        }
    }
}
