// Integration-test driver: group configs (GROUP config resources) with the stock Java Admin
// client, what kafka-configs.sh --entity-type groups runs.
//
//   java ... GroupConfigs BOOTSTRAP set GROUP NAME=VALUE [NAME=VALUE...]
//       Admin.incrementalAlterConfigs SET on the GROUP resource; prints {"ok": true} or
//       {"ok": false, "error": "<exception>: <message>"}
//   java ... GroupConfigs BOOTSTRAP delete GROUP NAME [NAME...]
//       the same with DELETE
//   java ... GroupConfigs BOOTSTRAP describe GROUP
//       describeConfigs (with synonyms) and listConfigResources(GROUP); prints
//       {"configs": {"name": ["value", "SOURCE", ["synonym=value:SOURCE", ...]], ...}, "listed": [...]}
// Exit code 0 when the calls returned (even with an error answer), 1 on a failure to call.

import java.util.ArrayList;
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
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.ListConfigResourcesOptions;
import org.apache.kafka.common.config.ConfigResource;

public final class GroupConfigs {
    private static String quote(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, args[2]);
        try (Admin admin = Admin.create(props)) {
            if (args[1].equals("set") || args[1].equals("delete")) {
                List<AlterConfigOp> ops = new ArrayList<>();
                for (int i = 3; i < args.length; i++) {
                    if (args[1].equals("set")) {
                        String[] kv = args[i].split("=", 2);
                        ops.add(new AlterConfigOp(new ConfigEntry(kv[0], kv[1]), AlterConfigOp.OpType.SET));
                    } else {
                        ops.add(new AlterConfigOp(new ConfigEntry(args[i], null), AlterConfigOp.OpType.DELETE));
                    }
                }
                try {
                    admin.incrementalAlterConfigs(Map.of(group, ops)).all().get(20, TimeUnit.SECONDS);
                    System.out.println("{\"ok\": true}");
                } catch (ExecutionException e) {
                    System.out.println("{\"ok\": false, \"error\": " + quote(e.getCause().getClass().getSimpleName()
                            + ": " + e.getCause().getMessage()) + "}");
                }
            } else if (args[1].equals("describe")) {
                Config config = admin.describeConfigs(Set.of(group), new DescribeConfigsOptions().includeSynonyms(true))
                        .all().get(20, TimeUnit.SECONDS).get(group);
                StringBuilder out = new StringBuilder("{\"configs\": {");
                String sep = "";
                for (ConfigEntry e : config.entries()) {
                    out.append(sep).append(quote(e.name())).append(": [").append(quote(e.value())).append(", ")
                       .append(quote(e.source().name())).append(", [");
                    String s2 = "";
                    for (ConfigEntry.ConfigSynonym s : e.synonyms()) {
                        out.append(s2).append(quote(s.name() + "=" + s.value() + ":" + s.source().name()));
                        s2 = ", ";
                    }
                    out.append("]]");
                    sep = ", ";
                }
                out.append("}, \"listed\": [");
                sep = "";
                for (ConfigResource r : admin.listConfigResources(Set.of(ConfigResource.Type.GROUP),
                        new ListConfigResourcesOptions()).all().get(20, TimeUnit.SECONDS)) {
                    out.append(sep).append(quote(r.name()));
                    sep = ", ";
                }
                System.out.println(out.append("]}"));
            } else {
                System.err.println("usage: GroupConfigs BOOTSTRAP set|delete|describe GROUP ...");
                System.exit(2);
            }
        }
    }
}
