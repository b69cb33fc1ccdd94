// Runs Kafka 4.4's own SimpleAssignor over the cases in cases.txt (one per line) and prints
// its target assignment per case. Line format:
//   TYPE|topic:count,...|assignable (topic:p.p.p;... or *)|member:sub.sub:topic/p.p+topic/p;...
// TYPE is H or X (homogeneous/heterogeneous); topics are numbers, their ids made by topic(n)
// below (tests/minibroker/test_share_assignor.py makes the same). Output line, or "crash X"
// when Kafka's builder throws X, or "error" for its PartitionAssignorException:
//   member:topic/p.p+topic/p;...   (members in input order, topics and partitions ascending)
// Regenerate (from this directory, jars from tests/reference):
//   L=~/.cache/minibroker-tests/kafka-4.4.0/libs; CP=$(ls $L/*.jar | tr '\n' ':')
//   java -cp "$CP" SimpleAssignorGolden.java < cases.txt > expected.txt
import java.io.*;
import java.util.*;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.*;
import org.apache.kafka.coordinator.group.assignor.SimpleAssignor;
import org.apache.kafka.coordinator.group.modern.*;

public class SimpleAssignorGolden {
    // Topic 1 hashes to 0, so its TopicIdPartitions hash to their partition numbers; topic n > 1
    // gets well-mixed 64-bit halves (negative hashes, high bits that the table spreads down).
    static Uuid topic(int n) { return n == 1 ? new Uuid(1L, 1L) : new Uuid(n * 0x9E3779B97F4A7C15L, n * 0xC2B2AE3D27D4EB4FL); }
    static final Map<Uuid, Integer> NUMBERS = new HashMap<>();
    static { for (int n = 1; n < 100; n++) NUMBERS.put(topic(n), n); }
    static int topicNumber(Uuid u) { return NUMBERS.get(u); }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split("\\|", -1);
            Map<Uuid, Integer> counts = new HashMap<>();
            for (String t : f[1].split(",")) { String[] kv = t.split(":"); counts.put(topic(Integer.parseInt(kv[0])), Integer.parseInt(kv[1])); }
            Optional<Map<Uuid, Set<Integer>>> assignable = Optional.empty();
            if (!f[2].equals("*")) {
                Map<Uuid, Set<Integer>> a = new HashMap<>();
                if (!f[2].isEmpty()) for (String t : f[2].split(";")) { String[] kv = t.split(":", -1); a.put(topic(Integer.parseInt(kv[0])), ints(kv[1])); }
                assignable = Optional.of(a);
            }
            LinkedHashMap<String, MemberSubscriptionAndAssignmentImpl> members = new LinkedHashMap<>();
            for (String m : f[3].split(";")) {
                String[] p = m.split(":", -1);
                Set<Uuid> subs = new HashSet<>();
                if (!p[1].isEmpty()) for (String s : p[1].split("\\.")) subs.add(topic(Integer.parseInt(s)));
                Map<Uuid, Set<Integer>> old = new HashMap<>();
                if (!p[2].isEmpty()) for (String tp : p[2].split("\\+")) { String[] kv = tp.split("/", -1); old.put(topic(Integer.parseInt(kv[0])), ints(kv[1])); }
                members.put(p[0], new MemberSubscriptionAndAssignmentImpl(Optional.empty(), Optional.empty(), subs, new Assignment(old)));
            }
            SubscriptionType type = f[0].equals("H") ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
            GroupSpec spec = new GroupSpecImpl(members, type, Map.of(), assignable);
            SubscribedTopicDescriber describer = new SubscribedTopicDescriber() {
                public int numPartitions(Uuid id) { return counts.getOrDefault(id, -1); }
                public Set<String> racksForPartition(Uuid id, int p) { return Set.of(); }
            };
            StringBuilder out = new StringBuilder();
            try {
                GroupAssignment result = new SimpleAssignor().assign(spec, describer);
                for (String m : members.keySet()) {
                    if (out.length() > 0) out.append(';');
                    out.append(m).append(':');
                    MemberAssignment ma = result.members().get(m);
                    if (ma == null) continue;
                    TreeMap<Integer, TreeSet<Integer>> sorted = new TreeMap<>();
                    ma.partitions().forEach((t, ps) -> { if (!ps.isEmpty()) sorted.put(topicNumber(t), new TreeSet<>(ps)); });
                    StringJoiner tj = new StringJoiner("+");
                    sorted.forEach((t, ps) -> { StringJoiner pj = new StringJoiner("."); ps.forEach(p -> pj.add(p.toString())); tj.add(t + "/" + pj); });
                    out.append(tj);
                }
                if (result.members().isEmpty()) out = new StringBuilder("{}");
            } catch (PartitionAssignorException e) {
                out = new StringBuilder("error");
            } catch (RuntimeException e) {
                // Kafka's own builder can fail (an iterator run dry); recorded, not compared.
                out = new StringBuilder("crash " + e.getClass().getSimpleName());
            }
            System.out.println(out);
        }
    }

    static Set<Integer> ints(String s) {
        Set<Integer> r = new HashSet<>();
        if (!s.isEmpty()) for (String x : s.split("\\.")) r.add(Integer.parseInt(x));
        return r;
    }
}
