// A Kafka Streams application with processing.guarantee=exactly_once_v2, for
// tests/integration/test_streams_eos.py:
//
//   java -cp <classes>:<kafka-streams jars> EosStreamsApp BOOTSTRAP APP STATE_DIR INSTANCE [PROTOCOL]
//
// PROTOCOL is the rebalance protocol: "classic" (the default) or "streams" (KIP-1071: the
// broker assigns the tasks, StreamsGroupHeartbeat).
//
// Topology: APP-events (key: event id, value "user,amount") joined with the GlobalKTable
// APP-users (user -> region), re-keyed by region (a repartition topic), summed per region in
// 10 s tumbling windows (a window store and its changelog), every update written to APP-totals
// as "region@windowStart" -> running sum. The record cache is off, so each event makes exactly
// one update: read with read_committed, a key's values are the running sums of its events, once
// each. It runs until killed; SIGTERM closes it cleanly.

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.WindowStore;

public final class EosStreamsApp {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], app = args[1], stateDir = args[2], instance = args[3];
        String protocol = args.length > 4 ? args[4] : "classic";
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        // Purge the repartition topic's consumed records (DeleteRecords) after each commit, not
        // every 30 s: the test checks that they went.
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 500);
        // A restarted instance takes its killed predecessor's place at once (static membership)
        // instead of waiting out its session.
        // With the streams protocol the session timeout is the group's (broker side), and a static
        // member killed with SIGKILL never left: Kafka 4.4 refuses its restart with
        // UNRELEASED_INSTANCE_ID (seen on the reference), so that run is dynamic, and a killed
        // instance's tasks move when its session (45 s) expires.
        if (!protocol.equals("streams")) {
            p.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), instance);
            p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10000);
        }
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 10000);

        StreamsBuilder b = new StreamsBuilder();
        GlobalKTable<String, String> users = b.globalTable(app + "-users",
                Consumed.with(Serdes.String(), Serdes.String()));
        b.stream(app + "-events", Consumed.with(Serdes.String(), Serdes.String()))
            .join(users, (id, v) -> v.split(",")[0], (v, region) -> region + "," + v.split(",")[1])
            .selectKey((id, v) -> v.split(",")[0])
            .groupByKey(Grouped.with("by-region", Serdes.String(), Serdes.String()))
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofDays(1)))
            .aggregate(() -> 0L, (region, v, sum) -> sum + Long.parseLong(v.split(",")[1]),
                       Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("sums")
                           .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
            .toStream()
            .map((w, sum) -> KeyValue.pair(w.key() + "@" + w.window().start(), String.valueOf(sum)))
            .to(app + "-totals", Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        // There is no SLF4J binding: say why a thread died, then stop as the default handler does.
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace(System.out);
            System.out.flush();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            System.out.println("state " + before + " -> " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            done.countDown();
        }));
        streams.start();
        done.await();
    }
}
