package dagger.proto;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

import dagger.proto.ProtoSchema.MessagePlan;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Protobuf records → Spark rows, in the JVM: the Catalyst expression behind Dagger's protobuf input
 * (dagger/serde/proto_jvm.py builds it with {@link #column}). Maven Central serves no {@code spark-protobuf}, and a
 * decoder in Python workers costs their memory and a hand-over per micro-batch; this reads the wire format straight
 * into Spark's rows ({@link ProtoReader}), with the type mapping of docs/types.md ({@link ProtoSchema}).
 *
 * <p>Its children are the record's bytes (BINARY) and, optionally, where its message starts (INT: past Confluent's
 * header, read by the Python reader). Built from a serialized {@code FileDescriptorSet}, the message's full name and
 * the fields the query reads (the others are skipped as unknown fields are); with {@code confluent} (schema id → the
 * message's index path in that version's file), each record's header is read here: magic byte 0, the schema id,
 * the message-index array.
 *
 * <p>Its value is a struct of the message's (read) fields and a last field, {@value #ERROR}: null for a record that
 * was read, else why it could not be (its fields are then null). Never null, never an exception for a record: random
 * bytes make an error string, not a failed task.
 *
 * <p>Built on the driver (the descriptors are resolved there, so a bad set fails the planning); each task's copy
 * plans the message once, at its first record.
 */
public final class ProtoRows extends Expression implements CodegenFallback, Serializable {
  private static final long serialVersionUID = 1L;

  /** The name of the struct's last field: why the record could not be read, or null. */
  public static final String ERROR = "__dagger_error";

  /** What the expression is, apart from its children. */
  public static final class Spec implements Serializable {
    private static final long serialVersionUID = 1L;
    final byte[] descriptorSet;
    final String message;
    final String[] fields; // null: every field
    final HashMap<Integer, int[]> confluent; // null: no header (or the start child says where the message is)

    Spec(byte[] descriptorSet, String message, String[] fields, HashMap<Integer, int[]> confluent) {
      this.descriptorSet = descriptorSet;
      this.message = message;
      this.fields = fields;
      this.confluent = confluent;
    }

    MessagePlan plan() {
      Set<String> keep = fields == null ? null : new HashSet<>(Arrays.asList(fields));
      return ProtoSchema.plan(ProtoSchema.message(descriptorSet, message), keep);
    }

    @Override
    public boolean equals(Object other) {
      if (!(other instanceof Spec s)) {
        return false;
      }
      if (!Arrays.equals(descriptorSet, s.descriptorSet) || !message.equals(s.message)
          || !Arrays.equals(fields, s.fields) || (confluent == null) != (s.confluent == null)) {
        return false;
      }
      if (confluent != null) {
        if (!confluent.keySet().equals(s.confluent.keySet())) {
          return false;
        }
        for (Map.Entry<Integer, int[]> e : confluent.entrySet()) {
          if (!Arrays.equals(e.getValue(), s.confluent.get(e.getKey()))) {
            return false;
          }
        }
      }
      return true;
    }

    @Override
    public int hashCode() {
      return Objects.hash(Arrays.hashCode(descriptorSet), message, Arrays.hashCode(fields));
    }

    @Override
    public String toString() {
      return message + (fields == null ? "" : " " + Arrays.toString(fields))
          + (confluent == null ? "" : " schema ids " + confluent.keySet());
    }
  }

  private final Expression payload;
  private final Expression start; // null: the message starts at byte 0 (or after a header read here)
  private final Spec spec;
  private final StructType dataType;
  private final scala.collection.immutable.Seq<Expression> children;
  private transient ProtoReader reader;
  private transient int width;

  public ProtoRows(Expression payload, Expression start, Spec spec, StructType dataType) {
    this.payload = payload;
    this.start = start;
    this.spec = spec;
    this.dataType = dataType;
    List<Expression> kids = start == null ? List.of(payload) : List.of(payload, start);
    this.children = scala.jdk.javaapi.CollectionConverters.asScala(kids).toSeq();
  }

  /**
   * The column of rows read from {@code payload}: records of {@code message} in {@code descriptorSet} (a serialized
   * FileDescriptorSet holding its file and imports), reading only {@code fields} (null: all). {@code start} (null
   * for none) says where each record's message begins; {@code confluent} (null for none) maps schema ids to the
   * message's index path in that version's file, and makes each record's Confluent header read here. Runs on the
   * driver: a message the set lacks fails here.
   */
  public static Column column(
      Column payload, Column start, byte[] descriptorSet, String message, List<?> fields, Map<?, ?> confluent) {
    Spec spec = new Spec(descriptorSet, message, names(fields), paths(confluent));
    StructType type = ProtoSchema.withError(spec.plan().type, ERROR);
    Expression starts = start == null ? null : ExpressionUtils.expression(start);
    return ExpressionUtils.column(new ProtoRows(ExpressionUtils.expression(payload), starts, spec, type));
  }

  /** The Spark type of the message's (read) fields, as JSON: what {@link #column}'s struct holds before its last. */
  public static String recordType(byte[] descriptorSet, String message, List<?> fields) {
    return new Spec(descriptorSet, message, names(fields), null).plan().type.json();
  }

  /**
   * What protobuf-java (the parser Raystack Dagger reads records with, {@code DynamicMessage}) makes of
   * {@code record}, serialized again: the reference the tests compare this reader with on damaged and
   * non-canonical bytes; null when protobuf-java refuses the record.
   */
  public static byte[] reserialized(byte[] descriptorSet, String message, byte[] record) {
    try {
      return com.google.protobuf.DynamicMessage.parseFrom(ProtoSchema.message(descriptorSet, message), record)
          .toByteArray();
    } catch (com.google.protobuf.InvalidProtocolBufferException e) {
      return null;
    }
  }

  static String[] names(List<?> fields) {
    if (fields == null) {
      return null;
    }
    String[] out = new String[fields.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = fields.get(i).toString();
    }
    return out;
  }

  private static HashMap<Integer, int[]> paths(Map<?, ?> confluent) {
    if (confluent == null) {
      return null;
    }
    HashMap<Integer, int[]> out = new HashMap<>();
    for (Map.Entry<?, ?> e : confluent.entrySet()) {
      List<?> path = (List<?>) e.getValue();
      int[] indexes = new int[path.size()];
      for (int i = 0; i < indexes.length; i++) {
        indexes[i] = Integer.parseInt(path.get(i).toString());
      }
      out.put(Integer.valueOf(e.getKey().toString()), indexes);
    }
    return out;
  }

  /** Runs on the executors, once per record: the row, or a row holding only why it could not be read. */
  public InternalRow decode(byte[] record, int from) {
    ProtoReader reader = reader();
    try {
      int at = from;
      if (spec.confluent != null) {
        at = header(record);
      }
      if (at < 0 || at > record.length) {
        return failed("the message starts at byte " + at + " of a " + record.length + "-byte record");
      }
      try {
        return reader.read(record, at, 1);
      } catch (ProtoReader.Failure e) {
        return failed("not a valid " + spec.message + ": " + e.getMessage());
      }
    } catch (ProtoReader.Failure e) { // the header
      return failed(e.getMessage());
    } catch (RuntimeException e) { // a record no rule foresaw: still the record's, never the task's, failure
      return failed("not a valid " + spec.message + ": unreadable (" + e + ")");
    }
  }

  private ProtoReader reader() {
    if (reader == null) {
      MessagePlan plan = spec.plan();
      reader = new ProtoReader(plan);
      width = plan.fields.length;
    }
    return reader;
  }

  private InternalRow failed(String why) {
    reader();
    Object[] values = new Object[width + 1];
    values[width] = UTF8String.fromString(why);
    return new GenericInternalRow(values);
  }

  /** Reads Confluent's header (Python's dagger/serde/confluent.py says the same of a column): where the message
   * starts. */
  private int header(byte[] record) {
    if (record.length < 5 || record[0] == 0 && record.length < 6) {
      if (record.length >= 1 && record[0] != 0) {
        throw new ProtoReader.Failure(magic(record[0]));
      }
      throw new ProtoReader.Failure(record.length < 5
          ? record.length + " bytes, shorter than the 5-byte header of Confluent's wire format"
          : "no message-index array after the schema id (a protobuf record needs at least 0x00)");
    }
    if (record[0] != 0) {
      throw new ProtoReader.Failure(magic(record[0]));
    }
    int id = (record[1] & 0xFF) << 24 | (record[2] & 0xFF) << 16 | (record[3] & 0xFF) << 8 | (record[4] & 0xFF);
    Cursor in = new Cursor(record, 5);
    long count = in.zigzag();
    int[] path;
    if (count == 0) {
      path = new int[] {0};
    } else {
      if (count < 0 || count > 100) {
        throw new ProtoReader.Failure("unreadable message-index array: " + count + " indexes");
      }
      path = new int[(int) count];
      for (int i = 0; i < count; i++) {
        long index = in.zigzag();
        if (index < 0 || index > Integer.MAX_VALUE) {
          throw new ProtoReader.Failure("unreadable message-index array: a negative index " + index);
        }
        path[i] = (int) index;
      }
    }
    int[] expected = spec.confluent.get(id);
    if (expected == null) {
      List<Integer> known = new ArrayList<>(spec.confluent.keySet());
      known.sort(null);
      throw new ProtoReader.Failure("schema id " + id + " is not among the versions of the stream's subject the job "
          + "read when it started (ids " + known + ")");
    }
    if (!Arrays.equals(path, expected)) {
      throw new ProtoReader.Failure("message index " + Arrays.toString(path) + " of schema id " + id + " is not "
          + spec.message + " (index " + Arrays.toString(expected) + ")");
    }
    return in.pos;
  }

  private static String magic(byte first) {
    if (first == 1) {
      return "magic byte 1: the schema is named by a GUID (Confluent's V1 wire format), which is not read yet; "
          + "producers must write the 4-byte schema id (magic byte 0)";
    }
    return "magic byte " + (first & 0xFF) + ", not 0: the record is not in Confluent's wire format (a producer that "
        + "puts the schema id in a record header leaves the payload unframed: that is not read)";
  }

  private static final class Cursor {
    final byte[] b;
    int pos;

    Cursor(byte[] b, int pos) {
      this.b = b;
      this.pos = pos;
    }

    long zigzag() {
      long result = 0;
      for (int shift = 0; shift < 64; shift += 7) {
        if (pos >= b.length) {
          throw new ProtoReader.Failure("unreadable message-index array: the record ends inside a varint");
        }
        byte x = b[pos++];
        result |= (long) (x & 0x7F) << shift;
        if (x >= 0) {
          return (result >>> 1) ^ -(result & 1);
        }
      }
      throw new ProtoReader.Failure("unreadable message-index array: a varint longer than 10 bytes");
    }
  }

  @Override
  public Object eval(InternalRow input) {
    Object record = payload.eval(input);
    if (record == null) {
      return failed("record value is null (tombstone)");
    }
    int from = 0;
    if (start != null) {
      Object at = start.eval(input);
      from = at == null ? 0 : (Integer) at;
    }
    return decode((byte[]) record, from);
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    return CodegenFallback.super.doGenCode(ctx, ev);
  }

  @Override
  public scala.collection.immutable.Seq<Expression> children() {
    return children;
  }

  /** Not deterministic to the optimizer, though it is: so that a filter on a read field is not pushed below the
   * projection that reads, and every record read twice (see AvroRows). */
  @Override
  public boolean deterministic() {
    return false;
  }

  @Override
  public DataType dataType() {
    return dataType;
  }

  @Override
  public boolean nullable() {
    return false;
  }

  @Override
  public Expression withNewChildrenInternal(scala.collection.immutable.IndexedSeq<Expression> children) {
    return new ProtoRows(children.apply(0), children.length() > 1 ? children.apply(1) : null, spec, dataType);
  }

  @Override
  public String prettyName() {
    return "dagger_protobuf";
  }

  @Override
  public int productArity() {
    return 4;
  }

  @Override
  public Object productElement(int n) {
    return switch (n) {
      case 0 -> payload;
      case 1 -> start;
      case 2 -> spec;
      case 3 -> dataType;
      default -> throw new IndexOutOfBoundsException(n);
    };
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof ProtoRows;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof ProtoRows p && payload.equals(p.payload) && Objects.equals(start, p.start)
        && spec.equals(p.spec);
  }

  @Override
  public int hashCode() {
    return Objects.hash(payload, start, spec);
  }
}
