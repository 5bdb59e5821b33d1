package dagger.proto;

import java.util.Arrays;
import java.util.HashMap;

import dagger.proto.ProtoSchema.FieldPlan;
import dagger.proto.ProtoSchema.Kind;
import dagger.proto.ProtoSchema.MessagePlan;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Reads protobuf's wire format straight into Spark's internal values, by a {@link MessagePlan}: one row object per
 * message, no intermediate message objects. Protobuf's own parsing rules, as protobuf-java applies them (the parser
 * Raystack Dagger reads records with): fields in any order; the last of a singular scalar's occurrences wins; a
 * singular message's occurrences merge (their bytes are read as one); repeated scalars packed or not; a map's last
 * entry of a key wins, where the key first stood, and an entry's unknown fields are skipped; unknown fields, and
 * known ones of an unexpected wire type, are skipped; nesting deeper than 100 is refused. Where the project's
 * mapping says otherwise it wins: strings must be UTF-8 in proto2 files too, and an enum number a closed (proto2)
 * enum lacks reads as its digits, as today's Python decoder reads them. A record that breaks the format raises
 * {@link Failure} with where and why.
 *
 * <p>Not thread-safe: one per task (each task's copy of the expression builds its own).
 */
final class ProtoReader {
  /** Nesting deeper than this (groups, JSON values) makes a record unreadable: protobuf's own limit. */
  static final int MAX_DEPTH = 100;

  /** Why a record cannot be read (no stack trace: it is the record's fault, not the code's). */
  static final class Failure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Failure(String message) {
      super(message, null, false, false);
    }
  }

  /** The scratch one message plan reads with: its repeated fields' values so far, the occurrences seen. */
  private static final class Frame {
    final Object[][] lists;
    final Object[][] mapValues;
    final int[] sizes;
    final HashMap<Object, Integer>[] mapIndex;
    final byte[][] seenBuf;
    final int[] seenStart;
    final int[] seenEnd;

    @SuppressWarnings("unchecked")
    Frame(MessagePlan plan) {
      lists = new Object[plan.repeated][];
      mapValues = new Object[plan.repeated][];
      sizes = new int[plan.repeated];
      mapIndex = new HashMap[plan.repeated];
      for (int i = 0; i < plan.repeated; i++) {
        lists[i] = new Object[8];
      }
      for (FieldPlan f : plan.fields) {
        if (f.isMap()) {
          mapValues[f.list] = new Object[8];
        }
      }
      seenBuf = new byte[plan.fields.length][];
      seenStart = new int[plan.fields.length];
      seenEnd = new int[plan.fields.length];
    }
  }

  private final MessagePlan top;
  private final HashMap<MessagePlan, Frame> frames = new HashMap<>();
  private int pos;

  ProtoReader(MessagePlan top) {
    this.top = top;
  }

  /** The record in {@code buf[from..]} as the top message's row, with {@code extra} null slots after its fields. */
  GenericInternalRow read(byte[] buf, int from, int extra) {
    pos = from;
    return message(top, buf, buf.length, 0, -1, extra);
  }

  private Frame frame(MessagePlan plan) {
    Frame frame = frames.get(plan);
    if (frame == null) {
      frame = new Frame(plan);
      frames.put(plan, frame);
    }
    return frame;
  }

  /** One message from {@code pos} to {@code end} (a group: to its end-group tag of field {@code group}). */
  private GenericInternalRow message(MessagePlan plan, byte[] b, int end, int depth, int group, int extra) {
    if (depth > MAX_DEPTH) {
      throw new Failure("messages nested deeper than " + MAX_DEPTH);
    }
    int width = plan.fields.length;
    Object[] values = new Object[width + extra];
    System.arraycopy(plan.absent, 0, values, 0, width);
    Frame frame = plan.repeated > 0 || width > 0 ? frame(plan) : null;
    if (frame != null) {
      Arrays.fill(frame.sizes, 0);
      Arrays.fill(frame.seenStart, -1);
      for (int i = 0; i < plan.repeated; i++) {
        if (frame.mapIndex[i] != null) {
          frame.mapIndex[i].clear();
        }
      }
    }
    boolean closed = group < 0;
    while (pos < end) {
      int at = pos;
      long tag = varint(b, end);
      int wire = (int) (tag & 7);
      long number = tag >>> 3;
      if (wire == 4) {
        if (number == group) {
          closed = true;
          break;
        }
        throw new Failure("an end-group tag (field " + number + ") without its group at byte " + at);
      }
      if (number == 0 || number > 536870911L) {
        throw new Failure("field number " + number + " at byte " + at);
      }
      FieldPlan field = plan.field((int) number);
      if (field == null) {
        skip(b, end, wire, (int) number, depth, at);
        continue;
      }
      read(field, values, frame, b, end, wire, depth, at);
      if (field.rivals != null && wire == field.kind.wireType()) {
        for (int rival : field.rivals) {
          values[rival] = null;
          frame.seenStart[rival] = -1;
        }
      }
    }
    if (!closed) {
      throw new Failure("group (field " + group + ") without its end-group tag");
    }
    if (frame != null && plan.repeated > 0) {
      for (FieldPlan field : plan.fields) {
        int n = field.list >= 0 ? frame.sizes[field.list] : 0;
        if (n == 0) {
          continue;
        }
        if (field.isMap()) {
          values[field.slot] = new ArrayBasedMapData(
              new GenericArrayData(Arrays.copyOf(frame.lists[field.list], n)),
              new GenericArrayData(Arrays.copyOf(frame.mapValues[field.list], n)));
        } else {
          values[field.slot] = new GenericArrayData(Arrays.copyOf(frame.lists[field.list], n));
        }
      }
    }
    return new GenericInternalRow(values);
  }

  private void read(FieldPlan f, Object[] values, Frame frame, byte[] b, int end, int wire, int depth, int at) {
    Kind kind = f.kind;
    if (f.isMap()) {
      if (wire != 2) {
        skip(b, end, wire, f.number, depth, at);
        return;
      }
      int stop = length(b, end, f);
      entry(f, frame, b, stop, depth);
      pos = stop;
      return;
    }
    if (f.repeated) {
      if (wire == 2 && kind.packable()) {
        int stop = length(b, end, f);
        while (pos < stop) {
          add(frame, f.list, scalar(f, b, stop));
        }
        if (pos != stop) {
          throw new Failure("field '" + f.name + "': a packed value runs past its end at byte " + pos);
        }
      } else if (wire == kind.wireType()) {
        add(frame, f.list, single(f, b, end, depth));
      } else {
        skip(b, end, wire, f.number, depth, at);
      }
      return;
    }
    if (wire != kind.wireType()) {
      skip(b, end, wire, f.number, depth, at); // as protobuf: a known number of another wire type is unknown
      return;
    }
    if (wire != 2 || kind == Kind.STRING || kind == Kind.BYTES) {
      values[f.slot] = single(f, b, end, depth);
      return;
    }
    // a message (or a type read as one): a second occurrence merges, which is reading both as one message
    int stop = length(b, end, f);
    int start = pos;
    int slot = f.slot;
    if (frame.seenStart[slot] < 0) {
      frame.seenBuf[slot] = b;
      frame.seenStart[slot] = start;
      frame.seenEnd[slot] = stop;
      values[slot] = embedded(f, b, start, stop, depth);
    } else {
      int before = frame.seenEnd[slot] - frame.seenStart[slot];
      byte[] merged = new byte[before + stop - start];
      System.arraycopy(frame.seenBuf[slot], frame.seenStart[slot], merged, 0, before);
      System.arraycopy(b, start, merged, before, stop - start);
      frame.seenBuf[slot] = merged;
      frame.seenStart[slot] = 0;
      frame.seenEnd[slot] = merged.length;
      values[slot] = embedded(f, merged, 0, merged.length, depth);
    }
    pos = stop;
  }

  private static void add(Frame frame, int list, Object value) {
    int n = frame.sizes[list];
    Object[] items = frame.lists[list];
    if (n == items.length) {
      items = frame.lists[list] = Arrays.copyOf(items, n * 2);
    }
    items[n] = value;
    frame.sizes[list] = n + 1;
  }

  /** One map entry from {@code pos} to {@code stop}; a key already there takes the new value where it stands. */
  private void entry(FieldPlan f, Frame frame, byte[] b, int stop, int depth) {
    FieldPlan keyPlan = f.key;
    FieldPlan valuePlan = f.value;
    Object key = keyPlan.defaultValue;
    Object value = valuePlan.defaultValue;
    while (pos < stop) {
      int at = pos;
      long tag = varint(b, stop);
      int wire = (int) (tag & 7);
      long number = tag >>> 3;
      if (number == 1 && wire == keyPlan.kind.wireType()) {
        key = single(keyPlan, b, stop, depth);
      } else if (number == 2 && wire == valuePlan.kind.wireType()) {
        if (wire == 2 && valuePlan.kind != Kind.STRING && valuePlan.kind != Kind.BYTES) {
          int end = length(b, stop, valuePlan);
          value = embedded(valuePlan, b, pos, end, depth);
          pos = end;
        } else {
          value = single(valuePlan, b, stop, depth);
        }
      } else if (wire == 4 || number == 0 || number > 536870911L) {
        throw new Failure("map field '" + f.name + "': a malformed entry at byte " + at);
      } else {
        skip(b, stop, wire, (int) number, depth, at);
      }
    }
    int list = f.list;
    int n = frame.sizes[list];
    Object[] keys = frame.lists[list];
    int found = -1;
    if (n <= 16) {
      for (int i = 0; i < n; i++) {
        if (keys[i].equals(key)) {
          found = i;
          break;
        }
      }
    } else {
      HashMap<Object, Integer> index = frame.mapIndex[list];
      if (index == null) {
        index = frame.mapIndex[list] = new HashMap<>();
      }
      if (index.size() < n) {
        for (int i = index.size(); i < n; i++) {
          index.putIfAbsent(keys[i], i);
        }
      }
      Integer at = index.get(key);
      found = at == null ? -1 : at;
    }
    if (found >= 0) {
      frame.mapValues[list][found] = value;
      return;
    }
    if (n == keys.length) {
      frame.lists[list] = Arrays.copyOf(keys, n * 2);
      frame.mapValues[list] = Arrays.copyOf(frame.mapValues[list], n * 2);
    }
    frame.lists[list][n] = key;
    frame.mapValues[list][n] = value;
    frame.sizes[list] = n + 1;
  }

  /** One value of field {@code f} whose tag was just read (its wire type is the field's). */
  private Object single(FieldPlan f, byte[] b, int end, int depth) {
    switch (f.kind) {
      case STRING: {
        int stop = length(b, end, f);
        int start = pos;
        pos = stop;
        if (!utf8(b, start, stop)) {
          throw new Failure("field '" + f.name + "' holds a string that is not UTF-8, at byte " + start);
        }
        return UTF8String.fromAddress(b, Platform.BYTE_ARRAY_OFFSET + start, stop - start);
      }
      case BYTES: {
        int stop = length(b, end, f);
        byte[] out = Arrays.copyOfRange(b, pos, stop);
        pos = stop;
        return out;
      }
      case GROUP:
        return message(f.message, b, end, depth + 1, f.number, 0);
      case MESSAGE: case TIMESTAMP: case DURATION: case WRAPPER: case STRUCT_JSON: case VALUE_JSON: case LIST_JSON:
      case RECURSIVE: {
        int stop = length(b, end, f);
        Object value = embedded(f, b, pos, stop, depth);
        pos = stop;
        return value;
      }
      default:
        return scalar(f, b, end);
    }
  }

  /** A length-delimited message of field {@code f} in {@code b[start..stop)}, as its Spark value. */
  private Object embedded(FieldPlan f, byte[] b, int start, int stop, int depth) {
    int saved = pos;
    pos = start;
    try {
      switch (f.kind) {
        case MESSAGE:
          return message(f.message, b, stop, depth + 1, -1, 0);
        case TIMESTAMP:
        case DURATION: {
          long[] parts = secondsAndNanos(b, stop, depth);
          return micros(parts[0], parts[1]);
        }
        case WRAPPER: {
          FieldPlan inner = f.value;
          Object value = inner.defaultValue;
          while (pos < stop) {
            int at = pos;
            long tag = tag(b, stop);
            int wire = (int) (tag & 7);
            if ((tag >>> 3) == 1 && wire == inner.kind.wireType()) {
              value = single(inner, b, stop, depth + 1);
            } else {
              skip(b, stop, wire, (int) (tag >>> 3), depth + 1, at);
            }
          }
          return value;
        }
        case STRUCT_JSON:
        case VALUE_JSON:
        case LIST_JSON:
          return UTF8String.fromString(ProtoJson.text(f.kind, b, start, stop, depth + 1));
        case RECURSIVE:
          check(f.shape, b, stop, depth + 1, -1);
          return Arrays.copyOfRange(b, start, stop);
        default:
          throw new IllegalStateException(f.kind.toString());
      }
    } finally {
      pos = saved;
    }
  }

  /** Checks a message kept as bytes as protobuf would parse it: strings UTF-8, messages and groups in turn. */
  private void check(ProtoSchema.Shape shape, byte[] b, int end, int depth, int group) {
    if (depth > MAX_DEPTH) {
      throw new Failure("messages nested deeper than " + MAX_DEPTH);
    }
    while (pos < end) {
      int at = pos;
      long tag = varint(b, end);
      int wire = (int) (tag & 7);
      long number = tag >>> 3;
      if (wire == 4) {
        if (number == group) {
          return;
        }
        throw new Failure("an end-group tag (field " + number + ") without its group at byte " + at);
      }
      if (number == 0 || number > 536870911L) {
        throw new Failure("field number " + number + " at byte " + at);
      }
      Integer key = (int) number;
      if (wire == 2 && (shape.strings.contains(key) || shape.messages.containsKey(key))) {
        long n = varint(b, end);
        if (n < 0 || n > end - pos) {
          throw new Failure("field " + number + ": a length of " + n + " bytes at byte " + at + " runs past the end");
        }
        int stop = pos + (int) n;
        if (shape.strings.contains(key)) {
          if (!utf8(b, pos, stop)) {
            throw new Failure("field " + number + " of a nested message holds a string that is not UTF-8, at byte "
                + pos);
          }
          pos = stop;
        } else {
          check(shape.messages.get(key), b, stop, depth + 1, -1);
          if (pos != stop) {
            throw new Failure("field " + number + ": a nested message ends past its length at byte " + pos);
          }
        }
      } else if (wire == 3 && shape.groups.containsKey(key)) {
        check(shape.groups.get(key), b, end, depth + 1, (int) number);
      } else {
        skip(b, end, wire, (int) number, depth, at);
      }
    }
    if (group >= 0) {
      throw new Failure("group (field " + group + ") without its end-group tag");
    }
  }

  /** Seconds and nanoseconds as microseconds, saturated at the ends of BIGINT (as today's decoder, ptars, does). */
  static long micros(long seconds, long nanos) {
    long whole;
    long high = Math.multiplyHigh(seconds, 1_000_000L);
    long low = seconds * 1_000_000L;
    if (high != (low >> 63)) {
      return seconds < 0 ? Long.MIN_VALUE : Long.MAX_VALUE;
    }
    whole = low;
    long part = nanos / 1000;
    long sum = whole + part;
    if (((whole ^ sum) & (part ^ sum)) < 0) {
      return whole < 0 ? Long.MIN_VALUE : Long.MAX_VALUE;
    }
    return sum;
  }

  /** A Timestamp's or Duration's fields 1 (int64 seconds) and 2 (int32 nanos), from {@code pos} to {@code stop}. */
  private long[] secondsAndNanos(byte[] b, int stop, int depth) {
    long seconds = 0;
    long nanos = 0;
    while (pos < stop) {
      int at = pos;
      long tag = tag(b, stop);
      int wire = (int) (tag & 7);
      long number = tag >>> 3;
      if (number == 1 && wire == 0) {
        seconds = varint(b, stop);
      } else if (number == 2 && wire == 0) {
        nanos = (int) varint(b, stop);
      } else {
        skip(b, stop, wire, (int) number, depth + 1, at);
      }
    }
    return new long[] {seconds, nanos};
  }

  /** A scalar (varint or fixed-width) value of {@code f}. */
  private Object scalar(FieldPlan f, byte[] b, int end) {
    switch (f.kind) {
      case INT32:
        return (int) varint(b, end);
      case INT64:
        return varint(b, end);
      case UINT32:
        return ((long) (int) varint(b, end)) & 0xFFFFFFFFL;
      case UINT64:
        return ProtoSchema.unsigned(varint(b, end));
      case SINT32: {
        int n = (int) varint(b, end);
        return (n >>> 1) ^ -(n & 1);
      }
      case SINT64: {
        long n = varint(b, end);
        return (n >>> 1) ^ -(n & 1);
      }
      case BOOL:
        return varint(b, end) != 0;
      case ENUM:
        return f.enumName((int) varint(b, end));
      case FIXED32:
        return ((long) fixed32(b, end)) & 0xFFFFFFFFL;
      case SFIXED32:
        return fixed32(b, end);
      case FLOAT:
        return Float.intBitsToFloat(fixed32(b, end));
      case FIXED64:
        return ProtoSchema.unsigned(fixed64(b, end));
      case SFIXED64:
        return fixed64(b, end);
      case DOUBLE:
        return Double.longBitsToDouble(fixed64(b, end));
      default:
        throw new Failure("field '" + f.name + "' cannot be read as a scalar");
    }
  }

  /** The length of a length-delimited value of {@code f}, checked against {@code end}; returns where it ends. */
  private int length(byte[] b, int end, FieldPlan f) {
    int at = pos;
    long n = varint(b, end);
    if (n < 0 || n > end - pos) {
      throw new Failure("field '" + f.name + "': a length of " + n + " bytes at byte " + at + " runs past the end ("
          + (end - pos) + " bytes left)");
    }
    return pos + (int) n;
  }

  /** A field's tag in a message of a fixed shape: a number above 0, no end-group tag. */
  private long tag(byte[] b, int end) {
    int at = pos;
    long tag = varint(b, end);
    long number = tag >>> 3;
    if (number == 0 || number > 536870911L) {
      throw new Failure("field number " + number + " at byte " + at);
    }
    if ((tag & 7) == 4) {
      throw new Failure("an end-group tag (field " + number + ") without its group at byte " + at);
    }
    return tag;
  }

  long varint(byte[] b, int end) {
    int p = pos;
    if (p < end) {
      byte first = b[p];
      if (first >= 0) {
        pos = p + 1;
        return first;
      }
    }
    long result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) {
        throw new Failure("the record ends inside a varint at byte " + pos);
      }
      byte x = b[p++];
      result |= (long) (x & 0x7F) << shift;
      if (x >= 0) {
        pos = p;
        return result;
      }
    }
    throw new Failure("a varint longer than 10 bytes at byte " + pos);
  }

  private int fixed32(byte[] b, int end) {
    if (end - pos < 4) {
      throw new Failure("the record ends inside a 32-bit value at byte " + pos);
    }
    int p = pos;
    pos = p + 4;
    return (b[p] & 0xFF) | (b[p + 1] & 0xFF) << 8 | (b[p + 2] & 0xFF) << 16 | (b[p + 3] & 0xFF) << 24;
  }

  private long fixed64(byte[] b, int end) {
    if (end - pos < 8) {
      throw new Failure("the record ends inside a 64-bit value at byte " + pos);
    }
    long lo = fixed32(b, end) & 0xFFFFFFFFL;
    long hi = fixed32(b, end) & 0xFFFFFFFFL;
    return lo | hi << 32;
  }

  /** Skips one value of wire type {@code wire} (a group: to its end-group tag), as an unknown field. */
  void skip(byte[] b, int end, int wire, int number, int depth, int at) {
    switch (wire) {
      case 0:
        varint(b, end);
        return;
      case 1:
        fixed64(b, end);
        return;
      case 5:
        fixed32(b, end);
        return;
      case 2: {
        long n = varint(b, end);
        if (n < 0 || n > end - pos) {
          throw new Failure("field " + number + ": a length of " + n + " bytes at byte " + at + " runs past the end");
        }
        pos += (int) n;
        return;
      }
      case 3: {
        if (depth >= MAX_DEPTH) {
          throw new Failure("groups nested deeper than " + MAX_DEPTH);
        }
        while (true) {
          if (pos >= end) {
            throw new Failure("group (field " + number + ") at byte " + at + " without its end-group tag");
          }
          int inner = pos;
          long tag = varint(b, end);
          int w = (int) (tag & 7);
          if (w == 4) {
            if ((tag >>> 3) != number) {
              throw new Failure("group (field " + number + ") closed by the end-group tag of field " + (tag >>> 3));
            }
            return;
          }
          skip(b, end, w, (int) (tag >>> 3), depth + 1, inner);
        }
      }
      default:
        throw new Failure("wire type " + wire + " (field " + number + ") at byte " + at + " does not exist");
    }
  }

  /** Whether {@code b[from..to)} is well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF). */
  static boolean utf8(byte[] b, int from, int to) {
    int i = from;
    while (i < to) {
      int c = b[i];
      if (c >= 0) {
        i++;
        continue;
      }
      c &= 0xFF;
      if (c < 0xC2) {
        return false;
      }
      if (c < 0xE0) {
        if (i + 1 >= to || (b[i + 1] & 0xC0) != 0x80) {
          return false;
        }
        i += 2;
      } else if (c < 0xF0) {
        if (i + 2 >= to) {
          return false;
        }
        int c1 = b[i + 1] & 0xFF;
        if ((c1 & 0xC0) != 0x80 || (b[i + 2] & 0xC0) != 0x80) {
          return false;
        }
        if (c == 0xE0 && c1 < 0xA0 || c == 0xED && c1 >= 0xA0) {
          return false;
        }
        i += 3;
      } else if (c < 0xF5) {
        if (i + 3 >= to) {
          return false;
        }
        int c1 = b[i + 1] & 0xFF;
        if ((c1 & 0xC0) != 0x80 || (b[i + 2] & 0xC0) != 0x80 || (b[i + 3] & 0xC0) != 0x80) {
          return false;
        }
        if (c == 0xF0 && c1 < 0x90 || c == 0xF4 && c1 >= 0x90) {
          return false;
        }
        i += 4;
      } else {
        return false;
      }
    }
    return true;
  }
}
