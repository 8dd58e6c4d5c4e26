package org.tflitetrain.core.json;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.math.BigInteger;
import java.util.List;
import java.util.Map;
import org.junit.Test;

public class JsonTest {
  @Test
  public void parsesAllValueKinds() {
    Object v = Json.parse(" {\"a\": [1, -2.5, 1e3, true, false, null, \"x\\u00e9\\n\\\"\"], \"b\": {}, \"c\": []} ");
    Map<?, ?> m = (Map<?, ?>) v;
    List<?> a = (List<?>) m.get("a");
    assertEquals(1L, a.get(0));
    assertEquals(-2.5, a.get(1));
    assertEquals(1000.0, a.get(2));
    assertEquals(Boolean.TRUE, a.get(3));
    assertEquals(Boolean.FALSE, a.get(4));
    assertSame(Json.NULL, a.get(5));
    assertEquals("x\u00e9\n\"", a.get(6));
    assertTrue(((Map<?, ?>) m.get("b")).isEmpty());
    assertTrue(((List<?>) m.get("c")).isEmpty());
  }

  @Test
  public void integersAreExact() {
    assertEquals(9007199254740993L, Json.parse("9007199254740993"));
    assertEquals(Long.MIN_VALUE, Json.parse("-9223372036854775808"));
    assertEquals(new BigInteger("9223372036854775808"), Json.parse("9223372036854775808"));
    assertEquals(0.3333333333333333, (Double) Json.parse("0.3333333333333333"), 0.0);
  }

  @Test
  public void surrogatePairsDecode() {
    assertEquals("\uD83D\uDE00", Json.parse("\"\\ud83d\\ude00\""));
    assertEquals("\uD83D\uDE00", Json.parse("\"\uD83D\uDE00\""));
  }

  @Test
  public void rejectsNonStrictInput() {
    String[] bad = {"", "{", "[1,]", "{\"a\":1,}", "01", "-", "1.", ".5", "1e", "NaN", "Infinity", "'a'",
        "{\"a\":1,\"a\":2}", "\"\t\"", "\"\\x\"", "\"\\ud83d\"", "\"\\ude00\"", "[1] 2", "// c\n1", "{a:1}",
        "tru", "nul", "1e999", "\"abc", "[1 2]", "\"\\u12\""};
    for (String text : bad) {
      assertThrows(text, JsonException.class, () -> Json.parse(text));
    }
  }

  @Test
  public void errorNamesOffset() {
    JsonException err = assertThrows(JsonException.class, () -> Json.parse("[1, 2,]"));
    assertTrue(err.getMessage(), err.getMessage().contains("offset 6"));
  }

  @Test
  public void depthIsLimited() {
    String deep = "[".repeat(Json.MAX_DEPTH + 1) + "]".repeat(Json.MAX_DEPTH + 1);
    assertThrows(JsonException.class, () -> Json.parse(deep));
    String ok = "[".repeat(Json.MAX_DEPTH) + "]".repeat(Json.MAX_DEPTH);
    assertTrue(Json.parse(ok) instanceof List);
  }
}
