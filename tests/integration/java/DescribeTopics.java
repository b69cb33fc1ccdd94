// Integration-test driver: the stock Java Admin's describeTopics, which sends DescribeTopicPartitions
// (KIP-966) page by page when the broker offers it, as kafka-topics.sh --describe does.
//
//   java ... DescribeTopics BOOTSTRAP PAGE_LIMIT [TOPIC...]
//       describeTopics(TOPIC...) with partitionSizeLimitPerResponse(PAGE_LIMIT); with no TOPIC, every
//       topic listTopics names. Prints {"topics": {"name": {"id": "...", "internal": false,
//       "partitions": [[index, leader, [replicas], [isr], [elr], [lastKnownElr]], ...]}, ...},
//       "errors": {"name": "<exception>: <message>", ...}}
// Exit code 0 when the calls returned (even with an error answer), 1 on a failure to call.

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;

public final class DescribeTopics {
    private static String quote(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static String nodes(List<Node> ns) {
        StringBuilder out = new StringBuilder("[");
        String sep = "";
        for (Node n : ns) {
            out.append(sep).append(n.id());
            sep = ", ";
        }
        return out.append("]").toString();
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        int limit = Integer.parseInt(args[1]);
        try (Admin admin = Admin.create(props)) {
            List<String> names = new ArrayList<>(Arrays.asList(args).subList(2, args.length));
            if (names.isEmpty()) {
                names.addAll(admin.listTopics().names().get(20, TimeUnit.SECONDS));
            }
            Map<String, KafkaFuture<TopicDescription>> futures = admin.describeTopics(names,
                    new DescribeTopicsOptions().partitionSizeLimitPerResponse(limit)).topicNameValues();
            Map<String, String> described = new TreeMap<>();
            Map<String, String> errors = new TreeMap<>();
            for (Map.Entry<String, KafkaFuture<TopicDescription>> f : futures.entrySet()) {
                try {
                    TopicDescription d = f.getValue().get(20, TimeUnit.SECONDS);
                    StringBuilder out = new StringBuilder("{\"id\": " + quote(d.topicId().toString())
                            + ", \"internal\": " + d.isInternal() + ", \"partitions\": [");
                    String sep = "";
                    for (TopicPartitionInfo p : d.partitions()) {
                        out.append(sep).append("[").append(p.partition()).append(", ")
                           .append(p.leader() == null ? -1 : p.leader().id()).append(", ")
                           .append(nodes(p.replicas())).append(", ").append(nodes(p.isr())).append(", ")
                           .append(nodes(p.elr())).append(", ").append(nodes(p.lastKnownElr())).append("]");
                        sep = ", ";
                    }
                    described.put(f.getKey(), out.append("]}").toString());
                } catch (ExecutionException e) {
                    errors.put(f.getKey(), e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
                }
            }
            StringBuilder out = new StringBuilder("{\"topics\": {");
            String sep = "";
            for (Map.Entry<String, String> e : described.entrySet()) {
                out.append(sep).append(quote(e.getKey())).append(": ").append(e.getValue());
                sep = ", ";
            }
            out.append("}, \"errors\": {");
            sep = "";
            for (Map.Entry<String, String> e : errors.entrySet()) {
                out.append(sep).append(quote(e.getKey())).append(": ").append(quote(e.getValue()));
                sep = ", ";
            }
            System.out.println(out.append("}}"));
        }
    }
}
