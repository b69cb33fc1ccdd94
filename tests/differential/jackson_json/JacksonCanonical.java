// Jackson as Confluent's JSON schema format configures it (json-schema-provider's
// jackson/Jackson.java: ALLOW_NON_NUMERIC_NUMBERS, USE_BIG_DECIMAL_FOR_FLOATS, exact BigDecimals;
// a TreeMap node factory for normalize()). For each line of stdin, a JSON string holding a schema
// text, prints one line: {"canonical": JsonSchema.canonicalString(), "normalized": the canonical
// string of normalize()} or {"error": ...} when Jackson refuses the text.
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

public class JacksonCanonical {
  static class SortingNodeFactory extends JsonNodeFactory {
    SortingNodeFactory() {
      super(true);
    }

    @Override
    public ObjectNode objectNode() {
      return new ObjectNode(this, new TreeMap<>());
    }
  }

  static ObjectMapper mapper(boolean sorted) {
    ObjectMapper m = JsonMapper.builder().enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS).build();
    m.enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS);
    m.setNodeFactory(sorted ? new SortingNodeFactory() : JsonNodeFactory.withExactBigDecimals(true));
    return m;
  }

  public static void main(String[] args) throws Exception {
    ObjectMapper plain = mapper(false);
    ObjectMapper sorted = mapper(true);
    // The answer line itself: ASCII only, so no console encoding can change it.
    ObjectMapper out = new ObjectMapper();
    out.getFactory().configure(JsonGenerator.Feature.ESCAPE_NON_ASCII, true);
    PrintStream stdout = new PrintStream(System.out, true, "UTF-8");
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      Map<String, String> answer = new LinkedHashMap<>();
      try {
        String text = out.readValue(line, String.class);
        JsonNode node = plain.readTree(text);
        if (node == null || node.isMissingNode()) {
          throw new IllegalArgumentException("no content");
        }
        String canonical = plain.writeValueAsString(node);
        answer.put("canonical", canonical);
        answer.put("normalized", plain.writeValueAsString(sorted.readTree(canonical)));
      } catch (Exception e) {
        answer.put("error", e.getClass().getSimpleName());
      }
      stdout.println(out.writeValueAsString(answer));
    }
  }
}
