// Integration-test driver: the stock Java client (kafka-clients) as an idempotent producer.
//
//   java -cp <classes>:<jars> IdempotentProduce BOOTSTRAP TOPIC PARTITIONS COUNT VALUE_SIZE [COMPRESSION [REQUEST_TIMEOUT_MS]]
//
// Sends COUNT records, record i to partition i % PARTITIONS with partition-local sequence
// s = i / PARTITIONS, in that order: key "p<partition>-<s>", value "p<partition>-<s>|" padded to
// VALUE_SIZE bytes with letters ('a' + (s * 31 + j) % 26 at position j). Waits for every
// acknowledgement, prints one line per failed send ("FAILED p<partition>-<s> ...", the first 50)
// and a final JSON summary line:
//   {"acked": N, "failed": N, "offset_mismatches": N, "first_mismatches": [...], "elapsed_ms": N}
// offset_mismatches counts acknowledged records whose offset is not s (on a fresh topic with
// exactly-once, in-order appends, record s of a partition lands at offset s).
// Exit code 0 only if every record was acknowledged.

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public final class IdempotentProduce {
    private static final int MAX_FAILURE_LINES = 50;

    static String value(int partition, int seq, int size) {
        StringBuilder sb = new StringBuilder(Math.max(size, 16));
        sb.append('p').append(partition).append('-').append(seq).append('|');
        for (int j = sb.length(); j < size; j++) {
            sb.append((char) ('a' + (int) (((long) seq * 31 + j) % 26)));
        }
        return sb.toString();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: IdempotentProduce BOOTSTRAP TOPIC PARTITIONS COUNT VALUE_SIZE "
                    + "[COMPRESSION [REQUEST_TIMEOUT_MS]]");
            System.exit(2);
        }
        final String bootstrap = args[0];
        final String topic = args[1];
        final int partitions = Integer.parseInt(args[2]);
        final int count = Integer.parseInt(args[3]);
        final int valueSize = Integer.parseInt(args[4]);
        final String compression = args.length > 5 ? args[5] : "none";
        final int requestTimeoutMs = args.length > 6 ? Integer.parseInt(args[6]) : 3000;

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "it-java-idempotent");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        props.put(ProducerConfig.RETRIES_CONFIG, Integer.toString(Integer.MAX_VALUE));
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, Integer.toString(requestTimeoutMs));
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, "16384");
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        props.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        props.put(ProducerConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "500");
        props.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, "50");
        props.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        props.put(ProducerConfig.SOCKET_CONNECTION_SETUP_TIMEOUT_MS_CONFIG, "3000");
        props.put(ProducerConfig.SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS_CONFIG, "5000");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());

        final AtomicInteger acked = new AtomicInteger();
        final AtomicInteger failed = new AtomicInteger();
        final AtomicInteger mismatches = new AtomicInteger();
        final AtomicInteger failureLines = new AtomicInteger();
        final List<String> firstMismatches = new ArrayList<>();
        final CountDownLatch done = new CountDownLatch(count);
        final long start = System.nanoTime();
        int exit;

        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++) {
                final int p = i % partitions;
                final int s = i / partitions;
                final String id = "p" + p + "-" + s;
                producer.send(new ProducerRecord<>(topic, p, id, value(p, s, valueSize)), (md, err) -> {
                    try {
                        if (err != null) {
                            failed.incrementAndGet();
                            if (failureLines.incrementAndGet() <= MAX_FAILURE_LINES) {
                                System.out.println("FAILED " + id + " " + err.getClass().getName() + ": "
                                        + err.getMessage());
                            }
                        } else {
                            acked.incrementAndGet();
                            if (md.offset() != s) {
                                mismatches.incrementAndGet();
                                synchronized (firstMismatches) {
                                    if (firstMismatches.size() < 10) {
                                        firstMismatches.add("\"" + id + "@" + md.offset() + "\"");
                                    }
                                }
                            }
                        }
                    } finally {
                        done.countDown();
                    }
                });
            }
            producer.flush();
            if (!done.await(150, TimeUnit.SECONDS)) {
                System.out.println("FAILED timeout: " + done.getCount() + " sends without a callback");
            }
            producer.close(Duration.ofSeconds(10));
        } catch (Exception e) {
            System.out.println("FAILED producer " + e.getClass().getName() + ": " + e.getMessage());
        }
        long elapsedMs = (System.nanoTime() - start) / 1_000_000;
        String mism;
        synchronized (firstMismatches) {
            mism = String.join(", ", firstMismatches);
        }
        System.out.println("{\"acked\": " + acked.get() + ", \"failed\": " + failed.get()
                + ", \"offset_mismatches\": " + mismatches.get() + ", \"first_mismatches\": [" + mism + "]"
                + ", \"elapsed_ms\": " + elapsedMs + "}");
        System.out.flush();
        exit = acked.get() == count ? 0 : 1;
        System.exit(exit);
    }
}
