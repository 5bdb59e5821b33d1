package dagger.proto;

import java.io.Serializable;
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
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

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
public final class ProtoRows extends Expression implements Serializable {
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
    // Catalyst hashes, compares and type-checks its expressions many times in each micro-batch's planning: the
    // hash and the type are computed once per copy, not from the descriptor set's bytes each time
    private transient int hash;
    private transient StructType type;

    Spec(byte[] descriptorSet, String message, String[] fields, HashMap<Integer, int[]> confluent) {
      this.descriptorSet = descriptorSet;
      this.message = message;
      this.fields = fields;
      this.confluent = confluent;
    }

    /** A new plan of the message (each reader and writer gets its own). */
    MessagePlan plan() {
      Set<String> keep = fields == null ? null : new HashSet<>(Arrays.asList(fields));
      return ProtoSchema.plan(ProtoSchema.message(descriptorSet, message), keep);
    }

    /** The message's table type (planned once per copy of the spec). */
    StructType type() {
      if (type == null) {
        type = plan().type;
      }
      return type;
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
      if (hash == 0) {
        hash = Objects.hash(Arrays.hashCode(descriptorSet), message, Arrays.hashCode(fields));
      }
      return hash;
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
  private final ProtoDecoder decoder;

  public ProtoRows(Expression payload, Expression start, Spec spec, StructType dataType) {
    this.payload = payload;
    this.start = start;
    this.spec = spec;
    this.dataType = dataType;
    this.decoder = new ProtoDecoder(spec);
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
    StructType type = ProtoSchema.withError(spec.type(), ERROR);
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

  static HashMap<Integer, int[]> paths(Map<?, ?> confluent) {
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

  @Override
  public Object eval(InternalRow input) {
    return decodeOrNull((byte[]) payload.eval(input), start == null ? null : (Integer) start.eval(input));
  }

  /** One record's row (the generated code's call): {@code from} says where its message starts (null: byte 0). */
  public InternalRow decodeOrNull(byte[] record, Integer from) {
    if (record == null) {
      return decoder.failed("record value is null (tombstone)");
    }
    return decoder.decode(record, from == null ? 0 : from);
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    if (start == null) {
      return Codegen.call(ctx, ev, this, "decodeOrNull", dataType, payload, new org.apache.spark.sql.catalyst
          .expressions.Literal(null, org.apache.spark.sql.types.DataTypes.IntegerType));
    }
    return Codegen.call(ctx, ev, this, "decodeOrNull", dataType, payload, start);
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
