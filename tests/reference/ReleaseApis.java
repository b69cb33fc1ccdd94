// Prints the APIs a Kafka release's broker serves, from that release's own kafka-clients jar:
// one line per ApiKeys member, "key<TAB>name<TAB>oldest<TAB>newest stable<TAB>listener scopes".
// Run by tests/reference/release_apis.py (java -cp kafka-clients-X.jar ReleaseApis.java), which
// writes minibroker/config/kafka_releases.py for --as-version. Works with 2.x to 4.x jars: newer
// methods (latestVersion(false): stable versions only; inScope) are looked up by reflection.
import java.lang.reflect.Method;
import org.apache.kafka.common.protocol.ApiKeys;

public class ReleaseApis {
    public static void main(String[] args) throws Exception {
        Method stable = null;
        try { stable = ApiKeys.class.getMethod("latestVersion", boolean.class); } catch (NoSuchMethodException e) { }
        Method inScope = null;
        Class<?> lt = null;
        try {
            lt = Class.forName("org.apache.kafka.common.message.ApiMessageType$ListenerType");
            inScope = ApiKeys.class.getMethod("inScope", lt);
        } catch (Exception e) { }
        for (ApiKeys k : ApiKeys.values()) {
            short hi = stable != null ? (short) stable.invoke(k, false) : k.latestVersion();
            String scope = "";
            if (inScope != null) {
                for (Object v : lt.getEnumConstants()) {
                    if ((boolean) inScope.invoke(k, v)) scope += v + ",";
                }
            }
            System.out.println(k.id + "\t" + k.name + "\t" + k.oldestVersion() + "\t" + hi + "\t" + scope);
        }
    }
}
