// Integration-test driver: the stock Java Admin client's feature API (KIP-584), what
// kafka-features.sh runs.
//
//   java -cp <classes>:<jars> FeatureLevels BOOTSTRAP describe
//   java -cp <classes>:<jars> FeatureLevels BOOTSTRAP update FEATURE LEVEL UPGRADE|SAFE_DOWNGRADE|UNSAFE_DOWNGRADE
//
// Prints one JSON line: describe -> {"epoch": N, "finalized": {"name": level, ...},
// "supported": {"name": [min, max], ...}}; update -> {"ok": true} or {"ok": false, "error": "..."}.
// Exit code 0 when the call returned (even with an error answer), 1 on a failure to call.

import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;

public final class FeatureLevels {
    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(props)) {
            if (args[1].equals("describe")) {
                FeatureMetadata md = admin.describeFeatures().featureMetadata().get(20, TimeUnit.SECONDS);
                StringBuilder out = new StringBuilder("{\"epoch\": ");
                out.append(md.finalizedFeaturesEpoch().orElse(-1L)).append(", \"finalized\": {");
                String sep = "";
                for (var e : md.finalizedFeatures().entrySet()) {
                    out.append(sep).append(quote(e.getKey())).append(": ").append(e.getValue().maxVersionLevel());
                    sep = ", ";
                }
                out.append("}, \"supported\": {");
                sep = "";
                for (var e : md.supportedFeatures().entrySet()) {
                    out.append(sep).append(quote(e.getKey())).append(": [").append(e.getValue().minVersion())
                       .append(", ").append(e.getValue().maxVersion()).append("]");
                    sep = ", ";
                }
                System.out.println(out.append("}}"));
            } else if (args[1].equals("update")) {
                FeatureUpdate update = new FeatureUpdate(Short.parseShort(args[3]),
                        FeatureUpdate.UpgradeType.valueOf(args[4]));
                try {
                    admin.updateFeatures(Map.of(args[2], update), new UpdateFeaturesOptions())
                         .all().get(20, TimeUnit.SECONDS);
                    System.out.println("{\"ok\": true}");
                } catch (ExecutionException e) {
                    System.out.println("{\"ok\": false, \"error\": " + quote(e.getCause().getClass().getSimpleName()
                            + ": " + e.getCause().getMessage()) + "}");
                }
            } else {
                System.err.println("usage: FeatureLevels BOOTSTRAP describe|update FEATURE LEVEL TYPE");
                System.exit(2);
            }
        }
    }
}
