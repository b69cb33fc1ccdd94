// Integration-test driver: the stock Java client's KafkaShareConsumer (KIP-932) and the Admin
// calls on share groups.
//
//   ShareConsume BOOTSTRAP consume GROUP TOPIC MODE WANT TIMEOUT_MS POLICY COMMIT
//     MODE implicit|explicit; POLICY (explicit only) accept | release-first (RELEASE a record at
//     its first delivery, ACCEPT later) | reject-odd (REJECT odd offsets, ACCEPT the rest);
//     COMMIT sync|async. Polls until WANT records came or TIMEOUT_MS passed, then commits and
//     closes. One JSON line per record: {"p": P, "o": O, "dc": DELIVERY_COUNT}, then
//     {"done": N}.
//   ShareConsume BOOTSTRAP admin list            -> {"groups": {"g": "Stable", ...}}
//   ShareConsume BOOTSTRAP admin describe GROUP  -> {"state": "...", "members": N, "epoch": E}
//   ShareConsume BOOTSTRAP admin offsets GROUP   -> {"offsets": {"topic-p": [start, lag], ...}}
//   ShareConsume BOOTSTRAP admin delete GROUP    -> {"ok": true} or {"ok": false, "error": "..."}

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ShareConsume {
    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static void main(String[] args) throws Exception {
        if (args[1].equals("consume")) {
            consume(args);
        } else {
            admin(args);
        }
    }

    private static void consume(String[] args) {
        String group = args[2], topic = args[3], mode = args[4];
        int want = Integer.parseInt(args[5]);
        long timeoutMs = Long.parseLong(args[6]);
        String policy = args[7], commit = args[8];
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", group);
        props.put("share.acknowledgement.mode", mode);
        int n = 0;
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(
                props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + timeoutMs;
            for (int pass = 0; pass < 100_000 && n < want && System.currentTimeMillis() < deadline; pass++) {
                ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    short dc = r.deliveryCount().orElse((short) -1);
                    System.out.println("{\"p\": " + r.partition() + ", \"o\": " + r.offset() + ", \"dc\": " + dc + "}");
                    n++;
                    if (mode.equals("explicit")) {
                        AcknowledgeType t = AcknowledgeType.ACCEPT;
                        if (policy.equals("release-first") && dc == 1) {
                            t = AcknowledgeType.RELEASE;
                        } else if (policy.equals("reject-odd") && r.offset() % 2 == 1) {
                            t = AcknowledgeType.REJECT;
                        }
                        c.acknowledge(r, t);
                    }
                }
                if (commit.equals("async")) {
                    c.commitAsync();
                } else {
                    c.commitSync(Duration.ofSeconds(15));
                }
            }
            c.commitSync(Duration.ofSeconds(15));
        }
        System.out.println("{\"done\": " + n + "}");
    }

    private static void admin(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(props)) {
            switch (args[2]) {
                case "list": {
                    StringBuilder out = new StringBuilder("{\"groups\": {");
                    String sep = "";
                    for (GroupListing g : admin.listGroups(ListGroupsOptions.forShareGroups()).all()
                            .get(20, TimeUnit.SECONDS)) {
                        out.append(sep).append(quote(g.groupId())).append(": ")
                           .append(quote(g.groupState().map(Object::toString).orElse("?")));
                        sep = ", ";
                    }
                    System.out.println(out.append("}}"));
                    break;
                }
                case "describe": {
                    ShareGroupDescription d = admin.describeShareGroups(List.of(args[3])).all()
                            .get(20, TimeUnit.SECONDS).get(args[3]);
                    System.out.println("{\"state\": " + quote(d.groupState().toString()) + ", \"members\": "
                            + d.members().size() + ", \"epoch\": " + d.groupEpoch() + "}");
                    break;
                }
                case "offsets": {
                    Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin
                            .listShareGroupOffsets(Map.of(args[3], new ListShareGroupOffsetsSpec()))
                            .partitionsToOffsetInfo(args[3]).get(20, TimeUnit.SECONDS);
                    StringBuilder out = new StringBuilder("{\"offsets\": {");
                    String sep = "";
                    for (var e : offsets.entrySet()) {
                        SharePartitionOffsetInfo info = e.getValue();
                        out.append(sep).append(quote(e.getKey().toString())).append(": [")
                           .append(info == null ? -1 : info.startOffset()).append(", ")
                           .append(info == null ? -1 : info.lag().orElse(-1L)).append("]");
                        sep = ", ";
                    }
                    System.out.println(out.append("}}"));
                    break;
                }
                case "delete": {
                    try {
                        admin.deleteShareGroups(List.of(args[3])).all().get(20, TimeUnit.SECONDS);
                        System.out.println("{\"ok\": true}");
                    } catch (ExecutionException e) {
                        System.out.println("{\"ok\": false, \"error\": " + quote(
                                e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage()) + "}");
                    }
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown admin command " + args[2]);
            }
        }
    }
}
