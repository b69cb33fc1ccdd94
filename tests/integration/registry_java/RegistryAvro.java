// Integration-test driver (issue 34): the Java side of a Schema Registry pipeline through minibroker.
// No Confluent-compatible serde is served from Maven Central here (io.confluent is not on Central and
// Apicurio's serdes are not in the offline mirror), so this is what Confluent's KafkaAvroSerializer
// does, written out: the registry over java.net.http with Confluent's content type, Apache Avro's
// BinaryEncoder/Decoder, and Confluent's wire format (magic byte 0, 4-byte big-endian schema id,
// Avro binary) in the stock kafka-clients producer and consumer.
//
//   java ... RegistryAvro BOOTSTRAP REGISTRY_URL TOPIC SCHEMA_V1 SCHEMA_V2 SCHEMA_BAD N_TO_CONSUME
//       registers SCHEMA_V1 under TOPIC-value, produces {"name": "java-1"} with it; registers
//       SCHEMA_V2, produces {"name": "java-2", "age": 7}; tries SCHEMA_BAD (expects 409); then
//       consumes N_TO_CONSUME records from the topic's start, fetches each writer schema by id
//       (GET /schemas/ids/{id}) and resolves it against SCHEMA_V2 as the reader's schema.
//       Prints one JSON line: {"ids": [id1, id2], "bad": {"status": 409, "error_code": ...},
//       "records": [{...}, ...], "writer_ids": [...]}
// Exit code 0 when everything ran, 1 on a failure.

import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class RegistryAvro {
    // What Confluent's RestService sends (io.confluent.kafka.schemaregistry.client.rest.RestService).
    private static final String CONTENT_TYPE = "application/vnd.schemaregistry.v1+json";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    private static HttpResponse<String> call(String method, String url, String body) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(20))
                .header("Accept", CONTENT_TYPE);
        if (body == null) {
            b.method(method, HttpRequest.BodyPublishers.noBody());
        } else {
            b.header("Content-Type", CONTENT_TYPE).method(method, HttpRequest.BodyPublishers.ofString(body));
        }
        return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    private static HttpResponse<String> register(String url, String subject, String schema) throws Exception {
        ObjectNode req = JSON.createObjectNode();
        req.put("schema", schema);
        return call("POST", url + "/subjects/" + URLEncoder.encode(subject, StandardCharsets.UTF_8) + "/versions",
                JSON.writeValueAsString(req));
    }

    private static byte[] serialize(int id, Schema schema, GenericRecord rec) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(0);
        out.write(ByteBuffer.allocate(4).putInt(id).array());
        BinaryEncoder enc = EncoderFactory.get().binaryEncoder(out, null);
        new GenericDatumWriter<GenericRecord>(schema).write(rec, enc);
        enc.flush();
        return out.toByteArray();
    }

    private static Object plain(Object v) {
        // Avro's Utf8 and boxed numbers into what Jackson writes as JSON strings and numbers
        return v instanceof CharSequence ? v.toString() : v;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], url = args[1], topic = args[2];
        Schema v1 = new Schema.Parser().parse(args[3]);
        Schema v2 = new Schema.Parser().parse(args[4]);
        String bad = args[5];
        int nConsume = Integer.parseInt(args[6]);
        String subject = topic + "-value";
        Map<String, Object> result = new LinkedHashMap<>();

        HttpResponse<String> r1 = register(url, subject, args[3]);
        if (r1.statusCode() != 200) throw new IllegalStateException("register v1: " + r1.statusCode() + " " + r1.body());
        int id1 = JSON.readTree(r1.body()).get("id").asInt();
        HttpResponse<String> r2 = register(url, subject, args[4]);
        if (r2.statusCode() != 200) throw new IllegalStateException("register v2: " + r2.statusCode() + " " + r2.body());
        int id2 = JSON.readTree(r2.body()).get("id").asInt();
        result.put("ids", List.of(id1, id2));

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
            GenericRecord a = new GenericData.Record(v1);
            a.put("name", "java-1");
            p.send(new ProducerRecord<>(topic, serialize(id1, v1, a))).get();
            GenericRecord b = new GenericData.Record(v2);
            b.put("name", "java-2");
            b.put("age", 7);
            p.send(new ProducerRecord<>(topic, serialize(id2, v2, b))).get();
        }

        HttpResponse<String> rb = register(url, subject, bad);
        Map<String, Object> badOut = new LinkedHashMap<>();
        badOut.put("status", rb.statusCode());
        JsonNode badBody = JSON.readTree(rb.body());
        badOut.put("error_code", badBody.path("error_code").asInt());
        result.put("bad", badOut);

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        List<Map<String, Object>> records = new ArrayList<>();
        List<Integer> writerIds = new ArrayList<>();
        Map<Integer, Schema> writers = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 60_000;
            while (records.size() < nConsume && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(500))) {
                    ByteBuffer buf = ByteBuffer.wrap(rec.value());
                    if (buf.get() != 0) throw new IllegalStateException("not Confluent's wire format (magic byte)");
                    int id = buf.getInt();
                    Schema writer = writers.get(id);
                    if (writer == null) {
                        HttpResponse<String> s = call("GET", url + "/schemas/ids/" + id, null);
                        if (s.statusCode() != 200) throw new IllegalStateException("schema " + id + ": " + s.body());
                        writer = new Schema.Parser().parse(JSON.readTree(s.body()).get("schema").asText());
                        writers.put(id, writer);
                    }
                    BinaryDecoder dec = DecoderFactory.get().binaryDecoder(rec.value(), 5, rec.value().length - 5, null);
                    GenericRecord g = new GenericDatumReader<GenericRecord>(writer, v2).read(null, dec);
                    Map<String, Object> m = new LinkedHashMap<>();
                    for (Schema.Field f : v2.getFields()) m.put(f.name(), plain(g.get(f.name())));
                    records.add(m);
                    writerIds.add(id);
                }
            }
        }
        result.put("records", records);
        result.put("writer_ids", writerIds);
        System.out.println(JSON.writeValueAsString(result));
    }
}
