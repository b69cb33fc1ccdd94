import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.avro.NameValidator;
import org.apache.avro.Schema;
import org.apache.avro.SchemaCompatibility;
import org.apache.avro.SchemaNormalization;

/**
 * Apache Avro's answers for the AVRO format's differential test (tests/differential/test_avro_java.py).
 *
 * <p>Reads JSON lines {"id", "reader", "writer", "refs": [texts]} on stdin and writes one JSON line per
 * input: for each schema, parsed as Confluent's AvroSchema parses a new registration (the references
 * first, then the schema, through one Schema.Parser with the strict name validator and defaults
 * validated), either {"ok": true, "canonical": toString(references), "parsing_form"} or
 * {"ok": false, "error": the exception's message}; and when both parse, SchemaCompatibility's verdict
 * with each incompatibility's type, location and message.
 */
public final class AvroCheck {
  private static final ObjectMapper MAPPER = new ObjectMapper();

  private AvroCheck() {}

  private static Schema parse(String text, JsonNode refs, ObjectNode out) {
    try {
      Schema.Parser parser = new Schema.Parser(NameValidator.STRICT_VALIDATOR);
      parser.setValidateDefaults(true);
      List<Schema> known = new ArrayList<>();
      if (refs != null) {
        for (JsonNode ref : refs) {
          known.add(parser.parse(ref.textValue()));
        }
      }
      Schema schema = parser.parse(text);
      out.put("ok", true);
      out.put("canonical", schema.toString(known, false));
      out.put("parsing_form", SchemaNormalization.toParsingForm(schema));
      return schema;
    } catch (RuntimeException e) {
      out.put("ok", false);
      out.put("error", e.getClass().getSimpleName());
      out.put("message", String.valueOf(e.getMessage()));
      return null;
    }
  }

  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    PrintStream out = new PrintStream(System.out, true, "UTF-8");
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) {
        continue;
      }
      JsonNode request = MAPPER.readTree(line);
      ObjectNode answer = MAPPER.createObjectNode();
      answer.set("id", request.get("id"));
      JsonNode refs = request.get("refs");
      Schema reader = parse(request.get("reader").textValue(), refs, answer.putObject("reader"));
      Schema writer = parse(request.get("writer").textValue(), refs, answer.putObject("writer"));
      if (reader != null && writer != null) {
        ObjectNode compat = answer.putObject("compat");
        try {
          SchemaCompatibility.SchemaCompatibilityResult result =
              SchemaCompatibility.checkReaderWriterCompatibility(reader, writer).getResult();
          compat.put("result", result.getCompatibility().name());
          ArrayNode list = compat.putArray("incompatibilities");
          for (SchemaCompatibility.Incompatibility i : result.getIncompatibilities()) {
            ObjectNode o = list.addObject();
            o.put("type", i.getType().name());
            o.put("location", i.getLocation());
            o.put("message", i.getMessage());
          }
        } catch (RuntimeException e) {
          compat.put("result", "ERROR");
          compat.put("message", e.getClass().getSimpleName() + ": " + e.getMessage());
        }
      }
      out.println(MAPPER.writeValueAsString(answer));
    }
  }
}
