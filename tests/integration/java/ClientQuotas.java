// Integration-test driver: client quotas with the stock Java Admin client (KIP-546), what
// kafka-configs.sh --entity-type users/clients/ips runs.
//
//   java ... ClientQuotas BOOTSTRAP alter [--validate-only] ENTITY KEY=VALUE|KEY= ...
//       Admin.alterClientQuotas on one entity: ENTITY is TYPE=NAME pairs joined by ","
//       ("user=alice,client-id=<default>"); KEY= removes KEY. Prints {"ok": true} or
//       {"ok": false, "error": "<exception>: <message>"}
//   java ... ClientQuotas BOOTSTRAP describe strict|any COMPONENT...
//       Admin.describeClientQuotas: COMPONENT is TYPE (any name), TYPE=NAME or TYPE=<default>.
//       Prints {"entries": ["<entity> -> <quotas>", ...]} sorted, or {"error": ...}
// Exit code 0 when the calls returned (even with an error answer), 1 on a failure to call.

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

public final class ClientQuotas {
    private static String quote(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static String name(String n) {
        return n.equals("<default>") ? null : n;
    }

    private static String error(ExecutionException e) {
        return quote(e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(props)) {
            if (args[1].equals("alter")) {
                int i = 2;
                boolean validateOnly = args[i].equals("--validate-only");
                if (validateOnly) i++;
                Map<String, String> entries = new HashMap<>();
                for (String part : args[i++].split(",")) {
                    String[] tn = part.split("=", 2);
                    entries.put(tn[0], name(tn[1]));
                }
                List<ClientQuotaAlteration.Op> ops = new ArrayList<>();
                for (; i < args.length; i++) {
                    String[] kv = args[i].split("=", 2);
                    ops.add(new ClientQuotaAlteration.Op(kv[0], kv[1].isEmpty() ? null : Double.valueOf(kv[1])));
                }
                try {
                    admin.alterClientQuotas(List.of(new ClientQuotaAlteration(new ClientQuotaEntity(entries), ops)),
                            new AlterClientQuotasOptions().validateOnly(validateOnly)).all().get(20, TimeUnit.SECONDS);
                    System.out.println("{\"ok\": true}");
                } catch (ExecutionException e) {
                    System.out.println("{\"ok\": false, \"error\": " + error(e) + "}");
                }
            } else if (args[1].equals("describe")) {
                List<ClientQuotaFilterComponent> components = new ArrayList<>();
                for (int i = 3; i < args.length; i++) {
                    String[] tn = args[i].split("=", 2);
                    if (tn.length == 1) components.add(ClientQuotaFilterComponent.ofEntityType(tn[0]));
                    else if (tn[1].equals("<default>")) components.add(ClientQuotaFilterComponent.ofDefaultEntity(tn[0]));
                    else components.add(ClientQuotaFilterComponent.ofEntity(tn[0], tn[1]));
                }
                ClientQuotaFilter filter = args[2].equals("strict") ? ClientQuotaFilter.containsOnly(components)
                        : ClientQuotaFilter.contains(components);
                try {
                    Map<ClientQuotaEntity, Map<String, Double>> found =
                            admin.describeClientQuotas(filter).entities().get(20, TimeUnit.SECONDS);
                    List<String> lines = new ArrayList<>();
                    for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : found.entrySet()) {
                        lines.add(quote(new TreeMap<>(e.getKey().entries()) + " -> " + new TreeMap<>(e.getValue())));
                    }
                    lines.sort(null);
                    System.out.println("{\"entries\": [" + String.join(", ", lines) + "]}");
                } catch (ExecutionException e) {
                    System.out.println("{\"error\": " + error(e) + "}");
                }
            }
        }
    }
}
