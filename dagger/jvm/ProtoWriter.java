package dagger.proto;

import java.util.Arrays;
import java.util.Comparator;

import dagger.proto.ProtoSchema.FieldPlan;
import dagger.proto.ProtoSchema.Kind;
import dagger.proto.ProtoSchema.MessagePlan;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.SpecializedGetters;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Writes Spark's internal values as protobuf's wire format, by a {@link MessagePlan} (the inverse of
 * {@link ProtoReader}): the row's type is the message's as docs/types.md maps it. As protobuf's serializers write:
 * fields in field-number order; a field without presence (proto3's plain scalars) only when it is not its default;
 * one with presence whenever it is not null; repeated scalars packed where the field is; a map's entries with their
 * key and value. A null leaves its field unset (a null in a list or a map stands for the element's default). A
 * value the field cannot hold (an enum name it lacks, an unsigned field's negative number) raises
 * {@link ProtoReader.Failure} naming the column.
 *
 * <p>Not thread-safe: one per task.
 */
final class ProtoWriter {
  private byte[] buf = new byte[512];
  private int pos;
  private final String[] path = new String[ProtoReader.MAX_DEPTH + 2];

  /** The serialized message of {@code row}. */
  byte[] write(MessagePlan plan, InternalRow row) {
    pos = 0;
    message(plan, row, 0);
    return Arrays.copyOf(buf, pos);
  }

  private static FieldPlan[] byNumber(MessagePlan plan) {
    if (plan.writeOrder == null) {
      FieldPlan[] order = plan.fields.clone();
      Arrays.sort(order, Comparator.comparingInt(f -> f.number));
      plan.writeOrder = order;
    }
    return plan.writeOrder;
  }

  private void message(MessagePlan plan, InternalRow row, int depth) {
    if (depth > ProtoReader.MAX_DEPTH) {
      throw new ProtoReader.Failure("messages nested deeper than " + ProtoReader.MAX_DEPTH);
    }
    for (FieldPlan f : byNumber(plan)) {
      if (row.isNullAt(f.slot)) {
        continue;
      }
      path[depth] = f.name;
      if (f.isMap()) {
        map(f, row.getMap(f.slot), depth);
      } else if (f.repeated) {
        repeated(f, row.getArray(f.slot), depth);
      } else if (f.presence || !isDefault(f, row, f.slot)) {
        tag(f.number, f.kind.wireType());
        value(f, row, f.slot, depth);
      }
    }
  }

  private void repeated(FieldPlan f, ArrayData items, int depth) {
    int n = items.numElements();
    if (n == 0) {
      return;
    }
    if (f.packed) {
      tag(f.number, 2);
      int mark = reserve();
      for (int i = 0; i < n; i++) {
        if (items.isNullAt(i)) {
          zero(f);
        } else {
          value(f, items, i, depth);
        }
      }
      close(mark);
      return;
    }
    for (int i = 0; i < n; i++) {
      tag(f.number, f.kind.wireType());
      if (items.isNullAt(i)) {
        zero(f);
      } else {
        value(f, items, i, depth);
      }
    }
  }

  private void map(FieldPlan f, MapData map, int depth) {
    ArrayData keys = map.keyArray();
    ArrayData values = map.valueArray();
    for (int i = 0; i < map.numElements(); i++) {
      tag(f.number, 2);
      int mark = reserve();
      tag(1, f.key.kind.wireType());
      value(f.key, keys, i, depth);
      tag(2, f.value.kind.wireType());
      if (values.isNullAt(i)) {
        zero(f.value);
      } else {
        value(f.value, values, i, depth);
      }
      close(mark);
    }
  }

  /** Whether a field without presence holds its default, which protobuf does not write. */
  private static boolean isDefault(FieldPlan f, SpecializedGetters in, int i) {
    switch (f.kind) {
      case INT32: case SINT32: case SFIXED32:
        return in.getInt(i) == 0;
      case INT64: case SINT64: case SFIXED64: case UINT32: case FIXED32:
        return in.getLong(i) == 0;
      case UINT64: case FIXED64:
        return in.getDecimal(i, 20, 0).isZero();
      case FLOAT:
        return Float.floatToRawIntBits(in.getFloat(i)) == 0;
      case DOUBLE:
        return Double.doubleToRawLongBits(in.getDouble(i)) == 0;
      case BOOL:
        return !in.getBoolean(i);
      case STRING:
        return in.getUTF8String(i).numBytes() == 0;
      case BYTES:
        return in.getBinary(i).length == 0;
      case ENUM: {
        Integer number = f.enumNumbers.get(in.getUTF8String(i));
        return number != null && number == 0;
      }
      default:
        return false;
    }
  }

  /** A null element of a list or map: the element's default. */
  private void zero(FieldPlan f) {
    switch (f.kind.wireType()) {
      case 0:
        if (f.kind == Kind.ENUM) {
          varint(f.enumNumbers.getOrDefault(f.defaultValue, 0));
        } else {
          varint(0);
        }
        return;
      case 1:
        fixed64(0);
        return;
      case 5:
        fixed32(0);
        return;
      case 3:
        tag(f.number, 4);
        return;
      default:
        varint(0); // an empty string, bytes or message
    }
  }

  /** One value of {@code f} (its tag written, where it has one). */
  private void value(FieldPlan f, SpecializedGetters in, int i, int depth) {
    switch (f.kind) {
      case INT32:
        varint(in.getInt(i));
        return;
      case SINT32: {
        int n = in.getInt(i);
        varint(((n << 1) ^ (n >> 31)) & 0xFFFFFFFFL);
        return;
      }
      case SFIXED32:
        fixed32(in.getInt(i));
        return;
      case INT64:
        varint(in.getLong(i));
        return;
      case SINT64: {
        long n = in.getLong(i);
        varint((n << 1) ^ (n >> 63));
        return;
      }
      case SFIXED64:
        fixed64(in.getLong(i));
        return;
      case UINT32:
        varint(unsigned32(f, in.getLong(i), depth));
        return;
      case FIXED32:
        fixed32((int) unsigned32(f, in.getLong(i), depth));
        return;
      case UINT64:
        varint(unsigned64(f, in.getDecimal(i, 20, 0), depth));
        return;
      case FIXED64:
        fixed64(unsigned64(f, in.getDecimal(i, 20, 0), depth));
        return;
      case FLOAT:
        fixed32(Float.floatToRawIntBits(in.getFloat(i)));
        return;
      case DOUBLE:
        fixed64(Double.doubleToRawLongBits(in.getDouble(i)));
        return;
      case BOOL:
        varint(in.getBoolean(i) ? 1 : 0);
        return;
      case ENUM: {
        UTF8String name = in.getUTF8String(i);
        Integer number = f.enumNumbers.get(name);
        if (number == null) {
          throw new ProtoReader.Failure("column '" + column(depth) + "' holds '" + name + "', which is not a value of "
              + "enum " + f.enumName + "; accepted: " + f.enumAccepted);
        }
        varint(number);
        return;
      }
      case STRING: {
        UTF8String s = in.getUTF8String(i);
        varint(s.numBytes());
        ensure(s.numBytes());
        s.writeToMemory(buf, org.apache.spark.unsafe.Platform.BYTE_ARRAY_OFFSET + pos);
        pos += s.numBytes();
        return;
      }
      case BYTES:
      case RECURSIVE: {
        byte[] b = in.getBinary(i);
        varint(b.length);
        bytes(b);
        return;
      }
      case MESSAGE: {
        int mark = reserve();
        message(f.message, in.getStruct(i, f.message.fields.length), depth + 1);
        close(mark);
        return;
      }
      case GROUP:
        message(f.message, in.getStruct(i, f.message.fields.length), depth + 1);
        tag(f.number, 4);
        return;
      case TIMESTAMP: {
        long micros = in.getLong(i);
        int mark = reserve();
        long seconds = Math.floorDiv(micros, 1_000_000L);
        long nanos = Math.floorMod(micros, 1_000_000L) * 1000;
        secondsAndNanos(seconds, nanos);
        close(mark);
        return;
      }
      case DURATION: {
        long micros = in.getLong(i);
        int mark = reserve();
        secondsAndNanos(micros / 1_000_000L, (micros % 1_000_000L) * 1000);
        close(mark);
        return;
      }
      case WRAPPER: {
        int mark = reserve();
        if (!isDefault(f.value, in, i)) {
          tag(1, f.value.kind.wireType());
          value(f.value, in, i, depth);
        }
        close(mark);
        return;
      }
      default: // Struct, Value, ListValue: read only
        throw new ProtoReader.Failure("column '" + column(depth) + "' cannot be written: its field is a "
            + "google.protobuf." + (f.kind == Kind.STRUCT_JSON ? "Struct" : f.kind == Kind.LIST_JSON ? "ListValue"
                : "Value") + ", which Dagger reads as JSON text and does not write");
    }
  }

  private void secondsAndNanos(long seconds, long nanos) {
    if (seconds != 0) {
      tag(1, 0);
      varint(seconds);
    }
    if (nanos != 0) {
      tag(2, 0);
      varint((int) nanos);
    }
  }

  private long unsigned32(FieldPlan f, long value, int depth) {
    if (value < 0 || value > 0xFFFFFFFFL) {
      throw new ProtoReader.Failure("column '" + column(depth) + "' holds " + value + ", which field '" + f.name
          + "' (" + f.kind.toString().toLowerCase() + ", 0 to 4294967295) cannot hold");
    }
    return value;
  }

  private static final Decimal MAX_UNSIGNED = Decimal.apply(new java.math.BigDecimal("18446744073709551615"));

  private long unsigned64(FieldPlan f, Decimal value, int depth) {
    if (value.compare(Decimal.apply(0)) < 0 || value.compare(MAX_UNSIGNED) > 0) {
      throw new ProtoReader.Failure("column '" + column(depth) + "' holds " + value + ", which field '" + f.name
          + "' (" + f.kind.toString().toLowerCase() + ", 0 to 18446744073709551615) cannot hold");
    }
    return value.toJavaBigDecimal().toBigInteger().longValue();
  }

  private String column(int depth) {
    return String.join(".", Arrays.copyOf(path, depth + 1));
  }

  // -- the buffer ---------------------------------------------------------------------------------------------

  private void ensure(int more) {
    if (pos + more > buf.length) {
      buf = Arrays.copyOf(buf, Math.max(buf.length * 2, pos + more));
    }
  }

  private void tag(int number, int wire) {
    varint(((long) number << 3) | wire);
  }

  private void varint(long v) {
    ensure(10);
    while ((v & ~0x7FL) != 0) {
      buf[pos++] = (byte) ((v & 0x7F) | 0x80);
      v >>>= 7;
    }
    buf[pos++] = (byte) v;
  }

  private void fixed32(int v) {
    ensure(4);
    buf[pos++] = (byte) v;
    buf[pos++] = (byte) (v >> 8);
    buf[pos++] = (byte) (v >> 16);
    buf[pos++] = (byte) (v >> 24);
  }

  private void fixed64(long v) {
    fixed32((int) v);
    fixed32((int) (v >>> 32));
  }

  private void bytes(byte[] b) {
    ensure(b.length);
    System.arraycopy(b, 0, buf, pos, b.length);
    pos += b.length;
  }

  /** A length-delimited value begins: one byte is kept for its length (more are made room for at its end). */
  private int reserve() {
    ensure(1);
    return pos++;
  }

  /** A length-delimited value begun at {@code mark} ends here: its length is written in front of it. */
  private void close(int mark) {
    int length = pos - mark - 1;
    int size = 1;
    for (int n = length >>> 7; n != 0; n >>>= 7) {
      size++;
    }
    if (size > 1) {
      ensure(size - 1);
      System.arraycopy(buf, mark + 1, buf, mark + size, length);
      pos += size - 1;
    }
    int at = mark;
    int n = length;
    while ((n & ~0x7F) != 0) {
      buf[at++] = (byte) ((n & 0x7F) | 0x80);
      n >>>= 7;
    }
    buf[at] = (byte) n;
  }
}
