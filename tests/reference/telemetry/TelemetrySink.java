package minibroker.reference;

import java.util.List;
import java.util.Map;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;

/**
 * The reference Kafka's receiver of KIP-714 client metrics (metric.reporters). Kafka advertises
 * GetTelemetrySubscriptions and PushTelemetry only when such a receiver is configured; this one
 * parses each payload as a real receiver would (an undecodable one is refused: Kafka answers
 * INVALID_RECORD) and keeps nothing, as minibroker's receiver parses and keeps the last values.
 */
public class TelemetrySink implements MetricsReporter, ClientTelemetryExporterProvider {
    @Override public void configure(Map<String, ?> configs) { }
    @Override public void init(List<KafkaMetric> metrics) { }
    @Override public void metricChange(KafkaMetric metric) { }
    @Override public void metricRemoval(KafkaMetric metric) { }
    @Override public void close() { }

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return (context, payload) -> {
            try {
                MetricsData.parseFrom(payload.data());
            } catch (Exception e) {
                throw new IllegalArgumentException("not an OTLP MetricsData: " + e.getMessage(), e);
            }
        };
    }
}
