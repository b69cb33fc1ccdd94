// Integration-test driver: a Java producer logged in with a delegation token whose expiry is short
// and renewed meanwhile (KIP-368: the broker gives the session the token's remaining life; the
// client re-authenticates before it ends), then left to expire.
//
//   java -cp <classes>:<jars> DelegationTokenReauth SASL_BOOTSTRAP USER PASSWORD TOPIC SECONDS
//
// As USER (PLAIN) create a token; for SECONDS, renew it every second and send a record every
// 250 ms with the token; then stop renewing and keep sending (bounded, 30 s) until a send fails.
// Prints one JSON line: {"sent": N, "after_expiry": "<exception class>" | "none"}.

import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.RenewDelegationTokenOptions;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.serialization.StringSerializer;

public final class DelegationTokenReauth {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], user = args[1], password = args[2], topic = args[3];
        long seconds = Long.parseLong(args[4]);
        Properties ap = new Properties();
        ap.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ap.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        ap.put(SaslConfigs.SASL_MECHANISM, "PLAIN");
        ap.put(SaslConfigs.SASL_JAAS_CONFIG, "org.apache.kafka.common.security.plain.PlainLoginModule required "
                + "username=\"" + user + "\" password=\"" + password + "\";");
        ap.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(ap)) {
            DelegationToken token = admin.createDelegationToken().delegationToken().get(20, TimeUnit.SECONDS);
            Properties pp = new Properties();
            pp.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
            pp.put(SaslConfigs.SASL_MECHANISM, "SCRAM-SHA-256");
            pp.put(SaslConfigs.SASL_JAAS_CONFIG, "org.apache.kafka.common.security.scram.ScramLoginModule required "
                    + "username=\"" + token.tokenInfo().tokenId() + "\" password=\"" + token.hmacAsBase64String()
                    + "\" tokenauth=\"true\";");
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "5000");
            pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "5000");
            pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "4000");
            pp.put(ProducerConfig.LINGER_MS_CONFIG, "0");
            int sent = 0;
            String after = "none";
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
                long end = System.currentTimeMillis() + seconds * 1000, lastRenew = 0;
                while (System.currentTimeMillis() < end) {
                    if (System.currentTimeMillis() - lastRenew >= 1000) {
                        admin.renewDelegationToken(token.hmac(), new RenewDelegationTokenOptions())
                             .expiryTimestamp().get(20, TimeUnit.SECONDS);
                        lastRenew = System.currentTimeMillis();
                    }
                    producer.send(new ProducerRecord<>(topic, 0, null, "renewed-" + sent)).get(20, TimeUnit.SECONDS);
                    sent++;
                    Thread.sleep(250);
                }
                long deadline = System.currentTimeMillis() + 30_000;
                while (System.currentTimeMillis() < deadline) {
                    try {
                        producer.send(new ProducerRecord<>(topic, 0, null, "unrenewed")).get(20, TimeUnit.SECONDS);
                        Thread.sleep(250);
                    } catch (ExecutionException e) {
                        after = e.getCause().getClass().getSimpleName();
                        break;
                    } catch (org.apache.kafka.common.KafkaException e) {
                        after = e.getClass().getSimpleName();
                        break;
                    }
                }
            }
            System.out.println("{\"sent\": " + sent + ", \"after_expiry\": \"" + after + "\"}");
        }
    }
}
