// Integration-test driver: the stock Java Admin client's delegation-token API (KIP-48) and clients
// that log in with a token (SCRAM with tokenauth="true"), as a job handed a token would.
//
//   java -cp <classes>:<jars> DelegationTokens SASL_BOOTSTRAP USER PASSWORD TOPIC
//
// As USER (SASL/PLAIN): create a token renewable by User:bob, describe, renew it for 60 s. With the
// token (SCRAM-SHA-512, tokenauth): produce three records to TOPIC and read them back (assign, no
// group), try to create a token (refused on a token session). As USER again: expire the token
// (-1: at once), describe, and try the token once more (refused at login).
// Prints one JSON line; exit code 0 when every call was made (the answers are in the JSON).

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateDelegationTokenOptions;
import org.apache.kafka.clients.admin.ExpireDelegationTokenOptions;
import org.apache.kafka.clients.admin.RenewDelegationTokenOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class DelegationTokens {
    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static Properties plain(String bootstrap, String user, String password) {
        Properties p = new Properties();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        p.put(SaslConfigs.SASL_MECHANISM, "PLAIN");
        p.put(SaslConfigs.SASL_JAAS_CONFIG, "org.apache.kafka.common.security.plain.PlainLoginModule required "
                + "username=\"" + user + "\" password=\"" + password + "\";");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        return p;
    }

    private static Properties withToken(String bootstrap, DelegationToken token) {
        Properties p = new Properties();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        p.put(SaslConfigs.SASL_MECHANISM, "SCRAM-SHA-512");
        p.put(SaslConfigs.SASL_JAAS_CONFIG, "org.apache.kafka.common.security.scram.ScramLoginModule required "
                + "username=\"" + token.tokenInfo().tokenId() + "\" password=\"" + token.hmacAsBase64String()
                + "\" tokenauth=\"true\";");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        return p;
    }

    private static String error(Throwable t) {
        Throwable c = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
        return c.getClass().getSimpleName();
    }

    private static List<String> ids(Admin admin) throws Exception {
        List<String> out = new ArrayList<>();
        for (DelegationToken t : admin.describeDelegationToken().delegationTokens().get(20, TimeUnit.SECONDS)) {
            out.add(quote(t.tokenInfo().tokenId()));
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], user = args[1], password = args[2], topic = args[3];
        StringBuilder out = new StringBuilder("{");
        DelegationToken token;
        try (Admin admin = Admin.create(plain(bootstrap, user, password))) {
            token = admin.createDelegationToken(new CreateDelegationTokenOptions()
                    .renewers(List.of(new KafkaPrincipal("User", "bob"))))
                    .delegationToken().get(20, TimeUnit.SECONDS);
            var info = token.tokenInfo();
            out.append("\"token_id\": ").append(quote(info.tokenId()))
               .append(", \"owner\": ").append(quote(info.owner().toString()))
               .append(", \"requester\": ").append(quote(info.tokenRequester().toString()))
               .append(", \"renewers\": ").append(quote(info.renewersAsString().toString()))
               .append(", \"lifetime_ms\": ").append(info.expiryTimestamp() - info.issueTimestamp())
               .append(", \"max_lifetime_ms\": ").append(info.maxTimestamp() - info.issueTimestamp())
               .append(", \"described\": ").append(ids(admin));
            long renewed = admin.renewDelegationToken(token.hmac(), new RenewDelegationTokenOptions()
                    .renewTimePeriodMs(60_000)).expiryTimestamp().get(20, TimeUnit.SECONDS);
            out.append(", \"renewed_for_ms\": ").append(renewed - System.currentTimeMillis() > 50_000 ? 60_000 : -1);
        }
        // with the token: produce, then read back as the token's owner
        Properties pp = withToken(bootstrap, token);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k" + i, "via-token-" + i)).get(20, TimeUnit.SECONDS);
            }
        }
        Properties cp = withToken(bootstrap, token);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.assign(List.of(new TopicPartition(topic, 0)));
            long deadline = System.currentTimeMillis() + 30_000;
            while (values.size() < 3 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    values.add(quote(r.value()));
                }
            }
        }
        out.append(", \"consumed\": ").append(values);
        try (Admin tokenAdmin = Admin.create(withToken(bootstrap, token))) {
            try {
                tokenAdmin.createDelegationToken().delegationToken().get(20, TimeUnit.SECONDS);
                out.append(", \"create_with_token\": \"ok\"");
            } catch (ExecutionException e) {
                out.append(", \"create_with_token\": ").append(quote(error(e)));
            }
        }
        try (Admin admin = Admin.create(plain(bootstrap, user, password))) {
            admin.expireDelegationToken(token.hmac(), new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1))
                 .expiryTimestamp().get(20, TimeUnit.SECONDS);
            out.append(", \"described_after_expire\": ").append(ids(admin));
        }
        try (Admin tokenAdmin = Admin.create(withToken(bootstrap, token))) {
            try {
                tokenAdmin.describeCluster().clusterId().get(20, TimeUnit.SECONDS);
                out.append(", \"login_after_expire\": \"ok\"");
            } catch (ExecutionException e) {
                out.append(", \"login_after_expire\": ").append(quote(error(e)));
            }
        }
        System.out.println(out.append("}"));
    }
}
