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
 * the row could not be written ({@value #ERROR}, null when it was), never null.
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
  private final scala.collection.immutable.Seq<Expression> children;
  private transient MessagePlan plan;
  private transient ProtoWriter writer;

  public ProtoBytes(Expression row, ProtoRows.Spec spec, byte[] header) {
    this.row = row;
    this.spec = spec;
    this.header = header == null ? new byte[0] : header;
    this.children = scala.jdk.javaapi.CollectionConverters.asScala(List.of(row)).toSeq();
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
    if (writer == null) {
      plan = spec.plan();
      writer = new ProtoWriter();
    }
    try {
      byte[] body = writer.write(plan, values);
      if (header.length == 0) {
        return new GenericInternalRow(new Object[] {body, null});
      }
      byte[] framed = new byte[header.length + body.length];
      System.arraycopy(header, 0, framed, 0, header.length);
      System.arraycopy(body, 0, framed, header.length, body.length);
      return new GenericInternalRow(new Object[] {framed, null});
    } catch (ProtoReader.Failure e) {
      return new GenericInternalRow(new Object[] {null, UTF8String.fromString(e.getMessage())});
    }
  }

  /** Spark's analysis: the row's type must be the message's. */
  @Override
  public org.apache.spark.sql.catalyst.analysis.TypeCheckResult checkInputDataTypes() {
    StructType expected = spec.plan().type;
    if (!sameType(row.dataType(), expected)) {
      return new org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckFailure("the rows to write as "
          + spec.message + " are " + row.dataType().simpleString() + ", not " + expected.simpleString());
    }
    return org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckSuccess$.MODULE$;
  }

  @Override
  public Object eval(InternalRow input) {
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
    return Codegen.call(ctx, ev, this, "encodeOrNull", TYPE, row);
  }

  @Override
  public scala.collection.immutable.Seq<Expression> children() {
    return children;
  }

  @Override
  public DataType dataType() {
    return TYPE;
  }

  @Override
  public boolean nullable() {
    return false;
  }

  @Override
  public Expression withNewChildrenInternal(scala.collection.immutable.IndexedSeq<Expression> children) {
    return new ProtoBytes(children.apply(0), spec, header);
  }

  @Override
  public String prettyName() {
    return "dagger_to_protobuf";
  }

  @Override
  public int productArity() {
    return 3;
  }

  @Override
  public Object productElement(int n) {
    return switch (n) {
      case 0 -> row;
      case 1 -> spec;
      case 2 -> header;
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
        && java.util.Arrays.equals(header, p.header);
  }

  @Override
  public int hashCode() {
    return Objects.hash(row, spec, java.util.Arrays.hashCode(header));
  }
}
