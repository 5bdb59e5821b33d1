package dagger.proto;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import dagger.proto.ProtoSchema.Kind;

/**
 * {@code google.protobuf.Struct}, {@code Value} and {@code ListValue} read from the wire into the JSON text the
 * table holds, character for character what the Python side writes ({@code json.dumps(MessageToDict(m),
 * separators=(",", ":"), sort_keys=True)}): keys sorted by code point, numbers as Python's {@code repr} of a float
 * ({@code 3.0}, {@code 1e+20}, {@code 1e-07}), non-ASCII characters escaped as {@code \}{@code uXXXX}. A number
 * that is NaN or infinite has no JSON form: the record is unreadable, as {@code MessageToDict} refuses it.
 */
final class ProtoJson {
  private ProtoJson() {}

  private static final Object NULL = new Object();

  /** The JSON text of a {@code kind} (STRUCT_JSON, VALUE_JSON, LIST_JSON) message in {@code b[start..stop)}. */
  static String text(Kind kind, byte[] b, int start, int stop, int depth) {
    Cursor in = new Cursor(b, start);
    Object value;
    switch (kind) {
      case STRUCT_JSON:
        value = struct(in, stop, depth);
        break;
      case LIST_JSON:
        value = list(in, stop, depth);
        break;
      default:
        value = value(in, stop, depth);
    }
    StringBuilder out = new StringBuilder();
    write(value, out);
    return out.toString();
  }

  private static final class Cursor {
    final byte[] b;
    int pos;

    Cursor(byte[] b, int pos) {
      this.b = b;
      this.pos = pos;
    }

    long varint(int end) {
      long result = 0;
      for (int shift = 0; shift < 64; shift += 7) {
        if (pos >= end) {
          throw new ProtoReader.Failure("a google.protobuf.Value ends inside a varint at byte " + pos);
        }
        byte x = b[pos++];
        result |= (long) (x & 0x7F) << shift;
        if (x >= 0) {
          return result;
        }
      }
      throw new ProtoReader.Failure("a varint longer than 10 bytes at byte " + pos);
    }

    /** A field's tag: a number above 0, and no end-group tag where no group is open. */
    long tag(int end) {
      int at = pos;
      long tag = varint(end);
      if ((tag >>> 3) == 0 || (tag >>> 3) > 536870911L) {
        throw new ProtoReader.Failure("field number " + (tag >>> 3) + " at byte " + at);
      }
      if ((tag & 7) == 4) {
        throw new ProtoReader.Failure("an end-group tag (field " + (tag >>> 3) + ") without its group at byte " + at);
      }
      return tag;
    }

    int length(int end) {
      long n = varint(end);
      if (n < 0 || n > end - pos) {
        throw new ProtoReader.Failure("a google.protobuf.Value's length of " + n + " runs past its end at byte " + pos);
      }
      return pos + (int) n;
    }

    String string(int end) {
      int stop = length(end);
      if (!ProtoReader.utf8(b, pos, stop)) {
        throw new ProtoReader.Failure("a google.protobuf.Struct holds a string that is not UTF-8, at byte " + pos);
      }
      String s = new String(b, pos, stop - pos, StandardCharsets.UTF_8);
      pos = stop;
      return s;
    }

    void skip(int wire, int number, int end, int depth) {
      switch (wire) {
        case 0:
          varint(end);
          return;
        case 1:
          advance(8, end);
          return;
        case 5:
          advance(4, end);
          return;
        case 2:
          pos = length(end);
          return;
        case 3:
          if (depth > ProtoReader.MAX_DEPTH) {
            throw new ProtoReader.Failure("groups nested deeper than " + ProtoReader.MAX_DEPTH);
          }
          while (true) {
            if (pos >= end) {
              throw new ProtoReader.Failure("a group without its end-group tag");
            }
            long t = varint(end);
            int w = (int) (t & 7);
            if ((t >>> 3) == 0) {
              throw new ProtoReader.Failure("field number 0 at byte " + pos);
            }
            if (w == 4) {
              if ((t >>> 3) != number) {
                throw new ProtoReader.Failure("a group closed by another field's end-group tag at byte " + pos);
              }
              return;
            }
            skip(w, (int) (t >>> 3), end, depth + 1);
          }
        default:
          throw new ProtoReader.Failure("wire type " + wire + " does not exist, at byte " + pos);
      }
    }

    void advance(int n, int end) {
      if (end - pos < n) {
        throw new ProtoReader.Failure("a google.protobuf.Value ends inside a fixed-width value at byte " + pos);
      }
      pos += n;
    }
  }

  private static Map<String, Object> struct(Cursor in, int stop, int depth) {
    if (depth > ProtoReader.MAX_DEPTH) {
      throw new ProtoReader.Failure("google.protobuf.Struct values nested deeper than " + ProtoReader.MAX_DEPTH);
    }
    Map<String, Object> fields = new LinkedHashMap<>();
    while (in.pos < stop) {
      long tag = in.tag(stop);
      int wire = (int) (tag & 7);
      if ((tag >>> 3) == 1 && wire == 2) {
        int end = in.length(stop);
        String key = "";
        Object value = NULL;
        while (in.pos < end) {
          long t = in.tag(end);
          int w = (int) (t & 7);
          if ((t >>> 3) == 1 && w == 2) {
            key = in.string(end);
          } else if ((t >>> 3) == 2 && w == 2) {
            int e = in.length(end);
            value = value(in, e, depth + 1);
            in.pos = e;
          } else {
            in.skip(w, (int) (t >>> 3), end, depth);
          }
        }
        fields.put(key, value); // an entry with fields it does not know is an entry still, as protobuf-java reads it
      } else {
        in.skip(wire, (int) (tag >>> 3), stop, depth);
      }
    }
    return fields;
  }

  private static List<Object> list(Cursor in, int stop, int depth) {
    if (depth > ProtoReader.MAX_DEPTH) {
      throw new ProtoReader.Failure("google.protobuf.ListValue values nested deeper than " + ProtoReader.MAX_DEPTH);
    }
    List<Object> values = new ArrayList<>();
    while (in.pos < stop) {
      long tag = in.tag(stop);
      int wire = (int) (tag & 7);
      if ((tag >>> 3) == 1 && wire == 2) {
        int end = in.length(stop);
        values.add(value(in, end, depth + 1));
        in.pos = end;
      } else {
        in.skip(wire, (int) (tag >>> 3), stop, depth);
      }
    }
    return values;
  }

  /** A {@code Value}: the last of its oneof's members on the wire, or null when it has none. */
  private static Object value(Cursor in, int stop, int depth) {
    if (depth > ProtoReader.MAX_DEPTH) {
      throw new ProtoReader.Failure("google.protobuf.Value values nested deeper than " + ProtoReader.MAX_DEPTH);
    }
    Object value = NULL;
    while (in.pos < stop) {
      long tag = in.tag(stop);
      int wire = (int) (tag & 7);
      long number = tag >>> 3;
      if (number == 1 && wire == 0) {
        in.varint(stop);
        value = NULL;
      } else if (number == 2 && wire == 1) {
        in.advance(8, stop);
        long bits = 0;
        for (int i = 7; i >= 0; i--) {
          bits = bits << 8 | (in.b[in.pos - 8 + i] & 0xFF);
        }
        double d = Double.longBitsToDouble(bits);
        if (Double.isNaN(d) || Double.isInfinite(d)) {
          throw new ProtoReader.Failure("a google.protobuf.Value holds " + d + ", which JSON cannot hold");
        }
        value = d;
      } else if (number == 3 && wire == 2) {
        value = in.string(stop);
      } else if (number == 4 && wire == 0) {
        value = in.varint(stop) != 0;
      } else if (number == 5 && wire == 2) {
        int end = in.length(stop);
        value = struct(in, end, depth + 1);
        in.pos = end;
      } else if (number == 6 && wire == 2) {
        int end = in.length(stop);
        value = list(in, end, depth + 1);
        in.pos = end;
      } else {
        in.skip(wire, (int) (tag >>> 3), stop, depth);
      }
    }
    return value;
  }

  @SuppressWarnings("unchecked")
  private static void write(Object value, StringBuilder out) {
    if (value == NULL) {
      out.append("null");
    } else if (value instanceof Boolean) {
      out.append(((Boolean) value) ? "true" : "false");
    } else if (value instanceof Double) {
      out.append(pythonRepr((Double) value));
    } else if (value instanceof String) {
      string((String) value, out);
    } else if (value instanceof List) {
      out.append('[');
      boolean first = true;
      for (Object item : (List<Object>) value) {
        if (!first) {
          out.append(',');
        }
        first = false;
        write(item, out);
      }
      out.append(']');
    } else {
      Map<String, Object> map = (Map<String, Object>) value;
      List<String> keys = new ArrayList<>(map.keySet());
      keys.sort(ProtoJson::byCodePoint);
      out.append('{');
      boolean first = true;
      for (String key : keys) {
        if (!first) {
          out.append(',');
        }
        first = false;
        string(key, out);
        out.append(':');
        write(map.get(key), out);
      }
      out.append('}');
    }
  }

  private static int byCodePoint(String a, String b) {
    int i = 0;
    int j = 0;
    while (i < a.length() && j < b.length()) {
      int ca = a.codePointAt(i);
      int cb = b.codePointAt(j);
      if (ca != cb) {
        return Integer.compare(ca, cb);
      }
      i += Character.charCount(ca);
      j += Character.charCount(cb);
    }
    return Integer.compare(a.length() - i, b.length() - j);
  }

  /** A string as Python's {@code json.dumps} writes it with {@code ensure_ascii}. */
  private static void string(String s, StringBuilder out) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': out.append("\\\""); break;
        case '\\': out.append("\\\\"); break;
        case '\n': out.append("\\n"); break;
        case '\r': out.append("\\r"); break;
        case '\t': out.append("\\t"); break;
        case '\b': out.append("\\b"); break;
        case '\f': out.append("\\f"); break;
        default:
          if (c < 0x20 || c > 0x7E) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
      }
    }
    out.append('"');
  }

  /** Python's {@code repr} of a float: the shortest digits that read back to it, fixed between 1e-4 and 1e16. */
  static String pythonRepr(double v) {
    if (v == 0) {
      return (1 / v < 0) ? "-0.0" : "0.0";
    }
    String sign = v < 0 ? "-" : "";
    BigDecimal exact = new BigDecimal(Math.abs(v));
    BigDecimal shortest = null;
    for (int p = 1; p <= 17 && shortest == null; p++) {
      BigDecimal even = exact.round(new MathContext(p, RoundingMode.HALF_EVEN));
      if (Double.parseDouble(even.toString()) == Math.abs(v)) {
        shortest = even;
        break;
      }
      BigDecimal down = exact.round(new MathContext(p, RoundingMode.FLOOR));
      BigDecimal up = exact.round(new MathContext(p, RoundingMode.CEILING));
      boolean downOk = Double.parseDouble(down.toString()) == Math.abs(v);
      boolean upOk = Double.parseDouble(up.toString()) == Math.abs(v);
      if (downOk && upOk) {
        shortest = exact.subtract(down).compareTo(up.subtract(exact)) <= 0 ? down : up;
      } else if (downOk) {
        shortest = down;
      } else if (upOk) {
        shortest = up;
      }
    }
    shortest = shortest.stripTrailingZeros();
    String digits = shortest.unscaledValue().toString();
    int decpt = digits.length() - shortest.scale();
    StringBuilder out = new StringBuilder(sign);
    if (decpt <= -4 || decpt > 16) {
      int exponent = decpt - 1;
      out.append(digits.charAt(0));
      if (digits.length() > 1) {
        out.append('.').append(digits, 1, digits.length());
      }
      out.append('e').append(exponent < 0 ? '-' : '+');
      int e = Math.abs(exponent);
      if (e < 10) {
        out.append('0');
      }
      out.append(e);
    } else if (decpt <= 0) {
      out.append("0.");
      for (int i = 0; i < -decpt; i++) {
        out.append('0');
      }
      out.append(digits);
    } else if (decpt >= digits.length()) {
      out.append(digits);
      for (int i = digits.length(); i < decpt; i++) {
        out.append('0');
      }
      out.append(".0");
    } else {
      out.append(digits, 0, decpt).append('.').append(digits, decpt, digits.length());
    }
    return out.toString();
  }
}
