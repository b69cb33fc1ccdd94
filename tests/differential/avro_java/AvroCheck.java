import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import org.apache.avro.NameValidator;
import org.apache.avro.Schema;
import org.apache.avro.SchemaCompatibility;
import org.apache.avro.SchemaNormalization;
import org.apache.avro.SchemaParseException;

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

  /**
   * What Confluent's AvroSchemaUtils.validateNames checks after a parse without validation (a
   * schema not new): the names of types, fields and enum symbols, with Avro's UTF validator.
   */
  private static void checkNames(Schema schema, Set<Schema> seen) {
    if (!seen.add(schema)) {
      return;
    }
    List<String> names = new ArrayList<>();
    switch (schema.getType()) {
      case RECORD:
        names.add(schema.getName());
        for (Schema.Field field : schema.getFields()) {
          names.add(field.name());
          checkNames(field.schema(), seen);
        }
        break;
      case ENUM:
        names.add(schema.getName());
        names.addAll(schema.getEnumSymbols());
        break;
      case FIXED:
        names.add(schema.getName());
        break;
      case ARRAY:
        checkNames(schema.getElementType(), seen);
        break;
      case MAP:
        checkNames(schema.getValueType(), seen);
        break;
      case UNION:
        for (Schema branch : schema.getTypes()) {
          checkNames(branch, seen);
        }
        break;
      default:
        break;
    }
    for (String name : names) {
      NameValidator.Result result = NameValidator.UTF_VALIDATOR.validate(name);
      if (!result.isOK()) {
        throw new SchemaParseException(result.getErrors());
      }
    }
  }

  private static Schema parse(String text, JsonNode refs, boolean lenient, ObjectNode out) {
    try {
      // Confluent's AvroSchema.getParser: strict names and defaults validated for a new schema,
      // neither for one already registered (then validateNames on the schema itself).
      Schema.Parser parser = new Schema.Parser(lenient ? NameValidator.NO_VALIDATION : NameValidator.STRICT_VALIDATOR);
      parser.setValidateDefaults(!lenient);
      List<Schema> known = new ArrayList<>();
      if (refs != null) {
        for (JsonNode ref : refs) {
          known.add(parser.parse(ref.textValue()));
        }
      }
      Schema schema = parser.parse(text);
      if (lenient) {
        checkNames(schema, Collections.newSetFromMap(new IdentityHashMap<>()));
      }
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
      answer.put("jdk", Runtime.version().feature());
      JsonNode refs = request.get("refs");
      boolean lenient = request.path("lenient").asBoolean(false);
      Schema reader = parse(request.get("reader").textValue(), refs, lenient, answer.putObject("reader"));
      Schema writer = parse(request.get("writer").textValue(), refs, lenient, answer.putObject("writer"));
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
