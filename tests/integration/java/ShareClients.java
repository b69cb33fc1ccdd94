// Differential-test driver (tests/differential/test_share_clients.py): one KafkaShareConsumer
// (kafka-clients 4.4) run the same way against Kafka and minibroker, printing what it saw.
//
//   ShareClients BOOTSTRAP GROUP TOPICS MODE WANT TIMEOUT_MS POLICY COMMIT IDLE_MS [PROP=VALUE ...]
//     TOPICS comma-separated; MODE implicit|explicit; COMMIT sync|async.
//     POLICY accept    ACCEPT everything (explicit) / let implicit acknowledgement do it
//            mixed     explicit: RELEASE offsets = 0 mod 3 at their first delivery (ACCEPT later),
//                      REJECT offsets = 1 mod 3, ACCEPT the rest
//            hold      explicit: acknowledge nothing; once WANT records came print {"holding": N}
//                      and sleep (at most TIMEOUT_MS) without polling: the test kills it
//            stall:MS  explicit: once WANT records came, stop polling for MS (past a short
//                      max.poll.interval.ms), then ACCEPT them and commitSync, printing the outcome
//            resubscribe:TOPIC:N  once WANT records came, subscribe to TOPIC alone, print
//                      {"resubscribed": N}, and go on until N more came
//     Polls until WANT records came or TIMEOUT_MS passed, then IDLE_MS more (what else comes),
//     commits and closes. One JSON line per record {"t": TOPIC, "p": P, "o": O, "dc": N, "k": KEY},
//     {"commit": {"t-p": "ok" | EXCEPTION}} per commitSync with acknowledgements, then {"done": N}.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ShareClients {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], mode = args[3], policy = args[6], commit = args[7];
        List<String> topics = Arrays.asList(args[2].split(","));
        int want = Integer.parseInt(args[4]);
        boolean resubscribed = false;
        long timeoutMs = Long.parseLong(args[5]), idleMs = Long.parseLong(args[8]);
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("share.acknowledgement.mode", mode);
        for (int i = 9; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        int n = 0;
        List<ConsumerRecord<byte[], byte[]>> held = new ArrayList<>();
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(
                props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(topics);
            long deadline = System.currentTimeMillis() + timeoutMs;
            long idleUntil = Long.MAX_VALUE;
            for (int pass = 0; pass < 100_000; pass++) {
                long now = System.currentTimeMillis();
                if (now > deadline || now > idleUntil) {
                    break;
                }
                ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(300));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    short dc = r.deliveryCount().orElse((short) -1);
                    String key = r.key() == null ? "" : new String(r.key(), StandardCharsets.UTF_8);
                    System.out.println("{\"t\": \"" + r.topic() + "\", \"p\": " + r.partition() + ", \"o\": "
                            + r.offset() + ", \"dc\": " + dc + ", \"k\": \"" + key + "\"}");
                    n++;
                    if (mode.equals("explicit")) {
                        if (policy.equals("hold") || policy.startsWith("stall:")) {
                            held.add(r);
                        } else {
                            AcknowledgeType t = AcknowledgeType.ACCEPT;
                            if (policy.equals("mixed") && r.offset() % 3 == 0 && dc == 1) {
                                t = AcknowledgeType.RELEASE;
                            } else if (policy.equals("mixed") && r.offset() % 3 == 1) {
                                t = AcknowledgeType.REJECT;
                            }
                            c.acknowledge(r, t);
                        }
                    }
                }
                System.out.flush();
                if (n >= want && !resubscribed && policy.startsWith("resubscribe:")) {
                    String[] r = policy.split(":");
                    c.subscribe(List.of(r[1]));
                    resubscribed = true;
                    want += Integer.parseInt(r[2]);
                    System.out.println("{\"resubscribed\": " + n + "}");
                    System.out.flush();
                }
                if (n >= want && idleUntil == Long.MAX_VALUE) {
                    idleUntil = System.currentTimeMillis() + idleMs;
                    if (policy.equals("hold")) {
                        System.out.println("{\"holding\": " + n + "}");
                        System.out.flush();
                        Thread.sleep(timeoutMs);  // the test kills this JVM with SIGKILL meanwhile
                        return;
                    }
                    if (policy.startsWith("stall:")) {
                        System.out.println("{\"stalling\": " + n + "}");
                        System.out.flush();
                        Thread.sleep(Long.parseLong(policy.substring(6)));
                        for (ConsumerRecord<byte[], byte[]> r : held) {
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                        held.clear();
                        printCommit(c.commitSync(Duration.ofSeconds(15)));
                        continue;
                    }
                }
                if (commit.equals("async")) {
                    c.commitAsync();
                } else {
                    printCommit(c.commitSync(Duration.ofSeconds(15)));
                }
            }
            printCommit(c.commitSync(Duration.ofSeconds(15)));
        }
        System.out.println("{\"done\": " + n + "}");
    }

    private static void printCommit(Map<TopicIdPartition, Optional<KafkaException>> result) {
        if (result.isEmpty()) {
            return;
        }
        Map<String, String> out = new TreeMap<>();
        for (var e : result.entrySet()) {
            out.put(e.getKey().topic() + "-" + e.getKey().partition(),
                    e.getValue().map(x -> x.getClass().getSimpleName()).orElse("ok"));
        }
        StringBuilder sb = new StringBuilder("{\"commit\": {");
        String sep = "";
        for (var e : out.entrySet()) {
            sb.append(sep).append('"').append(e.getKey()).append("\": \"").append(e.getValue()).append('"');
            sep = ", ";
        }
        System.out.println(sb.append("}}"));
        System.out.flush();
    }
}
