// Integration-test driver: KIP-714 client metrics with the stock Java client, what
// kafka-client-metrics.sh and an application with enable.metrics.push=true do.
//
//   java ... ClientMetrics BOOTSTRAP subscribe NAME METRICS INTERVAL_MS MATCH
//       Admin.incrementalAlterConfigs on the CLIENT_METRICS resource NAME, then describeConfigs and
//       listConfigResources; prints {"ok": true, "listed": [...], "configs": {...}} or {"ok": false, "error": ...}
//   java ... ClientMetrics BOOTSTRAP produce TOPIC SECONDS CLIENT_ID
//       a producer pushing its metrics while it sends for SECONDS; prints {"instance": "<uuid>", "sent": N}
//       (clientInstanceId: the id the broker gave it in GetTelemetrySubscriptions)

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListConfigResourcesOptions;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringSerializer;

public final class ClientMetrics {
    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static void main(String[] args) throws Exception {
        if (args[1].equals("subscribe")) {
            subscribe(args[0], args[2], args[3], args[4], args[5]);
        } else {
            produce(args[0], args[2], Integer.parseInt(args[3]), args[4]);
        }
    }

    static void subscribe(String bootstrap, String name, String metrics, String interval, String match) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(props)) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, name);
            Collection<AlterConfigOp> ops = List.of(
                new AlterConfigOp(new ConfigEntry("metrics", metrics), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("interval.ms", interval), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("match", match), AlterConfigOp.OpType.SET));
            try {
                admin.incrementalAlterConfigs(Map.of(res, ops)).all().get(20, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                System.out.println("{\"ok\": false, \"error\": " + quote(e.getCause().getClass().getSimpleName()
                        + ": " + e.getCause().getMessage()) + "}");
                return;
            }
            StringBuilder out = new StringBuilder("{\"ok\": true, \"listed\": [");
            String sep = "";
            for (ConfigResource r : admin.listConfigResources(Set.of(ConfigResource.Type.CLIENT_METRICS), new ListConfigResourcesOptions())
                    .all().get(20, TimeUnit.SECONDS)) {
                out.append(sep).append(quote(r.name()));
                sep = ", ";
            }
            out.append("], \"configs\": {");
            Config config = admin.describeConfigs(List.of(res)).all().get(20, TimeUnit.SECONDS).get(res);
            sep = "";
            for (ConfigEntry e : config.entries()) {
                out.append(sep).append(quote(e.name())).append(": ").append(quote(String.valueOf(e.value())));
                sep = ", ";
            }
            System.out.println(out.append("}}"));
        }
    }

    static void produce(String bootstrap, String topic, int seconds, String clientId) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        props.put(ProducerConfig.ENABLE_METRICS_PUSH_CONFIG, "true");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        long sent = 0;
        String instance;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            long end = System.currentTimeMillis() + seconds * 1000L;
            while (System.currentTimeMillis() < end) {
                producer.send(new ProducerRecord<>(topic, "k" + sent, "v" + sent)).get(10, TimeUnit.SECONDS);
                sent++;
                Thread.sleep(20);
            }
            instance = producer.clientInstanceId(Duration.ofSeconds(10)).toString();
        }
        System.out.println("{\"instance\": " + quote(instance) + ", \"sent\": " + sent + "}");
    }
}
