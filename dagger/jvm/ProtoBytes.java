package dagger.proto;

import java.io.Serializable;
import java.util.List;
import java.util.Objects;

import dagger.proto.ProtoSchema.MessagePlan;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Spark rows → protobuf records, in the JVM: the Catalyst expression behind the Kafka sink's protobuf values and
 * keys (dagger/serde/proto_jvm.py builds it with {@link #column}, after mapping the output columns onto the
 * message's fields by name). Its child is a struct of the message's type as docs/types.md maps it; its value a
 * struct of the serialized message ({@value #VALUE}, BINARY, after {@code header}: Confluent's, or none) and why
 * the row could not be written ({@value #ERROR}, null when it was), never null. Built by {@link #refusing} its value
 * is the serialized message alone, and a row that cannot be written fails the query in the sink's words.
 *
 * <p>Built on the driver (the descriptors are resolved, and the child's type checked, there); each task's copy
 * plans the message once.
 */
public final class ProtoBytes extends Expression implements Serializable {
  private static final long serialVersionUID = 1L;

  public static final String VALUE = "value";
  public static final String ERROR = "error";
  static final StructType TYPE = new StructType()
      .add(VALUE, DataTypes.BinaryType, true)
      .add(ERROR, DataTypes.StringType, true);

  private final Expression row;
  private final ProtoRows.Spec spec;
  private final byte[] header;
  /** Why a row cannot be written before the encoder sees it (a string child, null when none), refusing mode only. */
  private final Expression problem;
  /** The words around a refused row's reason; null: the struct mode (the value and the error). */
  private final Refusal refusal;
  private final scala.collection.immutable.Seq<Expression> children;
  private transient MessagePlan plan;
  private transient ProtoWriter writer;

  /** A refused row's message: {@code before + reason + after}. */
  public record Refusal(String before, String after) implements Serializable {}

  /** A row the sink cannot write, in refusing mode: it fails the task, and the query, with the sink's words. */
  public static final class Refused extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Refused(String message) {
      super(message, null, false, false);
    }
  }

  public ProtoBytes(Expression row, ProtoRows.Spec spec, byte[] header) {
    this(row, spec, header, null, null);
  }

  ProtoBytes(Expression row, ProtoRows.Spec spec, byte[] header, Expression problem, Refusal refusal) {
    this.row = row;
    this.spec = spec;
    this.header = header == null ? new byte[0] : header;
    this.problem = problem;
    this.refusal = refusal;
    this.children = scala.jdk.javaapi.CollectionConverters.asScala(
        problem == null ? List.of(row) : List.of(row, problem)).toSeq();
  }

  /**
   * The column of {@code row} (a struct of the message's type) serialized as {@code message} of
   * {@code descriptorSet}, each behind {@code header} (null: none). Runs on the driver: a row of another type than
   * the message's fails Spark's analysis, naming both.
   */
  public static Column column(Column row, byte[] descriptorSet, String message, byte[] header) {
    ProtoRows.Spec spec = new ProtoRows.Spec(descriptorSet, message, null, null);
    spec.plan(); // the message is in the set
    return ExpressionUtils.column(new ProtoBytes(ExpressionUtils.expression(row), spec, header));
  }

  /**
   * The column of {@code row} serialized as {@code message} (BINARY, never null), where a row that cannot be
   * written fails the query with {@code "SinkError: " + before + why + after}: one expression where the struct
   * form needs three in the sink's projection (Catalyst re-plans each micro-batch's). {@code problem} (a string
   * column, or null) is why a row cannot be written before it is encoded (a value its field cannot hold), null
   * when it can. Runs on the driver.
   */
  public static Column refusing(Column row, Column problem, byte[] descriptorSet, String message, byte[] header,
      String before, String after) {
    ProtoRows.Spec spec = new ProtoRows.Spec(descriptorSet, message, null, null);
    spec.plan();
    return ExpressionUtils.column(new ProtoBytes(ExpressionUtils.expression(row), spec, header,
        problem == null ? null : ExpressionUtils.expression(problem), new Refusal(before, after)));
  }

  /** Whether two types are the same but for their nullability. */
  static boolean sameType(DataType a, DataType b) {
    if (a instanceof StructType sa && b instanceof StructType sb) {
      if (sa.fields().length != sb.fields().length) {
        return false;
      }
      for (int i = 0; i < sa.fields().length; i++) {
        if (!sa.fields()[i].name().equals(sb.fields()[i].name())
            || !sameType(sa.fields()[i].dataType(), sb.fields()[i].dataType())) {
          return false;
        }
      }
      return true;
    }
    if (a instanceof org.apache.spark.sql.types.ArrayType aa && b instanceof org.apache.spark.sql.types.ArrayType ab) {
      return sameType(aa.elementType(), ab.elementType());
    }
    if (a instanceof org.apache.spark.sql.types.MapType ma && b instanceof org.apache.spark.sql.types.MapType mb) {
      return sameType(ma.keyType(), mb.keyType()) && sameType(ma.valueType(), mb.valueType());
    }
    return a.equals(b);
  }

  /** The struct's type: the serialized message and the error. */
  public static String resultType() {
    return TYPE.json();
  }

  /** Runs on the executors, once per row. */
  public InternalRow encode(InternalRow values) {
    try {
      return new GenericInternalRow(new Object[] {bytes(values), null});
    } catch (ProtoReader.Failure e) {
      return new GenericInternalRow(new Object[] {null, UTF8String.fromString(e.getMessage())});
    }
  }

  /** The record of a row, behind the header. */
  private byte[] bytes(InternalRow values) {
    if (writer == null) {
      plan = spec.plan();
      writer = new ProtoWriter();
    }
    byte[] body = writer.write(plan, values);
    if (header.length == 0) {
      return body;
    }
    byte[] framed = new byte[header.length + body.length];
    System.arraycopy(header, 0, framed, 0, header.length);
    System.arraycopy(body, 0, framed, header.length, body.length);
    return framed;
  }

  /** Refusing mode, on the executors: the record of a row, or the query fails with why it cannot be written. */
  public byte[] valueOrRefuse(InternalRow values) {
    return valueOrRefuse(values, null);
  }

  /** {@link #valueOrRefuse(InternalRow)} of a row whose {@code problem} (null: none) was found before encoding. */
  public byte[] valueOrRefuse(InternalRow values, UTF8String problem) {
    if (problem != null) {
      throw refused(problem.toString());
    }
    if (values == null) {
      throw refused("the row is null");
    }
    try {
      return bytes(values);
    } catch (ProtoReader.Failure e) {
      throw refused(e.getMessage());
    }
  }

  private Refused refused(String why) {
    return new Refused("SinkError: " + refusal.before() + why + refusal.after());
  }

  /** Spark's analysis: the row's type must be the message's. */
  @Override
  public org.apache.spark.sql.catalyst.analysis.TypeCheckResult checkInputDataTypes() {
    StructType expected = spec.type();
    if (!sameType(row.dataType(), expected)) {
      return new org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckFailure("the rows to write as "
          + spec.message + " are " + row.dataType().simpleString() + ", not " + expected.simpleString());
    }
    return org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckSuccess$.MODULE$;
  }

  @Override
  public Object eval(InternalRow input) {
    if (refusal != null) {
      Object found = problem == null ? null : problem.eval(input);
      return valueOrRefuse((InternalRow) row.eval(input), (UTF8String) found);
    }
    return encodeOrNull((InternalRow) row.eval(input));
  }

  /** {@link #encode}, or why a null row cannot be (the generated code's call). */
  public InternalRow encodeOrNull(InternalRow values) {
    if (values == null) {
      return new GenericInternalRow(new Object[] {null, UTF8String.fromString("the row is null")});
    }
    return encode(values);
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    if (refusal == null) {
      return Codegen.call(ctx, ev, this, "encodeOrNull", TYPE, row);
    }
    return problem == null
        ? Codegen.call(ctx, ev, this, "valueOrRefuse", DataTypes.BinaryType, row)
        : Codegen.call(ctx, ev, this, "valueOrRefuse", DataTypes.BinaryType, row, problem);
  }

  @Override
  public scala.collection.immutable.Seq<Expression> children() {
    return children;
  }

  @Override
  public DataType dataType() {
    return refusal == null ? TYPE : DataTypes.BinaryType;
  }

  @Override
  public boolean nullable() {
    return false;
  }

  @Override
  public Expression withNewChildrenInternal(scala.collection.immutable.IndexedSeq<Expression> children) {
    return new ProtoBytes(children.apply(0), spec, header, problem == null ? null : children.apply(1), refusal);
  }

  @Override
  public String prettyName() {
    return "dagger_to_protobuf";
  }

  @Override
  public int productArity() {
    return 5;
  }

  @Override
  public Object productElement(int n) {
    return switch (n) {
      case 0 -> row;
      case 1 -> spec;
      case 2 -> header;
      case 3 -> problem;
      case 4 -> refusal;
      default -> throw new IndexOutOfBoundsException(n);
    };
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof ProtoBytes;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof ProtoBytes p && row.equals(p.row) && spec.equals(p.spec)
        && java.util.Arrays.equals(header, p.header) && Objects.equals(problem, p.problem)
        && Objects.equals(refusal, p.refusal);
  }

  @Override
  public int hashCode() {
    return Objects.hash(row, spec, java.util.Arrays.hashCode(header), problem, refusal);
  }
}
