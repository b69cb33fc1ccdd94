// Prints XXH3-64 values from hash4j 0.22 (the version Kafka 4.4 ships, in the tests/reference
// libs) for tests/protocol/test_xxh3.py: raw byte strings of chosen lengths (byte i = i*7+3),
// and hash streams as Kafka's Utils.computeTopicHash/computeGroupHash build them.
// Regenerate: L=~/.cache/minibroker-tests/kafka-4.4.0/libs
//   java -cp "$L/hash4j-0.22.0.jar" Xxh3Golden.java > golden.txt
import com.dynatrace.hash4j.hashing.*;
import java.util.*;
public class Xxh3Golden { public static void main(String[] a) {
  // raw byte inputs of every length 0..300 (bytes i*7+3), then stream semantics checks
  for (int n : new int[]{0,1,2,3,4,5,8,9,16,17,100,128,129,200,240,241,300,1023,1024,1025,1088,2048,2049,5000}) {
    byte[] b = new byte[n];
    for (int i = 0; i < n; i++) b[i] = (byte) (i * 7 + 3);
    System.out.println("raw " + n + " " + Hashing.xxh3_64().hashBytesToLong(b));
  }
  System.out.println("str " + Hashing.xxh3_64().hashStream().putString("t").getAsLong());
  System.out.println("mix " + Hashing.xxh3_64().hashStream().putByte((byte)0).putLong(0x0123456789abcdefL).putLong(-2L).putString("héllo").putInt(3).putInt(0).putInt(1).putInt(2).getAsLong());
  System.out.println("long " + Hashing.xxh3_64().hashStream().putLong(3352353673255890915L).getAsLong());
}}
