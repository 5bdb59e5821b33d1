package dagger.avro;

import java.io.IOException;
import java.io.Serializable;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.Decoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.ResolvingDecoder;
import org.apache.avro.util.Utf8;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Avro datums → Spark rows, in the JVM: the Catalyst expression behind Dagger's Avro input
 * (dagger/serde/avro_decode.py builds it with {@link #column}).
 *
 * <p>Its children are a record's writer schema id (INT) and its payload (BINARY, the datum without Confluent's
 * header); its value is the record as the reader schema's row, whose last field (the decoded flag) is true, or
 * null when the id is not one of the writers given or the payload does not decode (too short, a bad union
 * index, a negative length...). Each writer is resolved against the reader by Avro's own rules ({@link
 * ResolvingDecoder}: fields added with defaults, fields removed, promotions, enum and union branches mapped).
 *
 * <p>Why not Spark's {@code from_avro}: it decodes a datum into Avro's {@code GenericRecord} first, then copies
 * that into Spark's rows, making a {@code SpecificInternalRow} for every nested record, whose constructor reads the
 * task's SQL configuration once per field in Spark 4.2 (docs/investigations/spark_nested_rows.md). This reads the
 * bytes straight into Spark's internal values: one row object per record, nested or not.
 *
 * <p>Built on the driver (the schemas are checked there); evaluated on the executors, where each task's copy
 * parses its schemas once, at its first record.
 */
public final class AvroRows extends Expression implements CodegenFallback, Serializable {
  private static final long serialVersionUID = 1L;

  /** The schemas: what the expression is, apart from its children. */
  public static final class Spec implements Serializable {
    private static final long serialVersionUID = 1L;
    final String reader;
    final String type;
    final HashMap<Integer, String> writers;

    Spec(String reader, String type, HashMap<Integer, String> writers) {
      this.reader = reader;
      this.type = type;
      this.writers = writers;
    }

    @Override
    public boolean equals(Object other) {
      return other instanceof Spec s && reader.equals(s.reader) && type.equals(s.type) && writers.equals(s.writers);
    }

    @Override
    public int hashCode() {
      return Objects.hash(reader, type, writers);
    }

    @Override
    public String toString() {
      return "writers " + writers.keySet();
    }
  }

  private final Expression id;
  private final Expression payload;
  private final Spec spec;
  private final StructType dataType;
  private final scala.collection.immutable.Seq<Expression> children;
  private transient Map<Integer, Reader> readers;
  private transient BinaryDecoder bytes;

  public AvroRows(Expression id, Expression payload, Spec spec) {
    this.id = id;
    this.payload = payload;
    this.spec = spec;
    this.dataType = (StructType) DataType.fromJson(spec.type);
    this.children = scala.jdk.javaapi.CollectionConverters.asScala(List.of(id, payload)).toSeq();
  }

  /**
   * The column of rows decoded from {@code payload} by the writer schema {@code id} names. {@code writers} maps
   * ids to writer schemas' JSON; {@code type} is the row's Spark type as JSON (the reader's fields, then a
   * boolean). Runs on the driver; every writer is parsed and resolved here once, so a schema Avro refuses fails
   * the planning, not a task.
   */
  public static Column column(Column id, Column payload, String reader, String type, Map<?, ?> writers) {
    HashMap<Integer, String> ids = new HashMap<>();
    for (Map.Entry<?, ?> e : writers.entrySet()) {
      ids.put(Integer.valueOf(e.getKey().toString()), e.getValue().toString());
    }
    AvroRows rows =
        new AvroRows(ExpressionUtils.expression(id), ExpressionUtils.expression(payload), new Spec(reader, type, ids));
    rows.readers();
    return ExpressionUtils.column(rows);
  }

  /** Runs on the executors, once per record: the row, or null. */
  public Object decode(int schemaId, byte[] datum) {
    Reader reader = readers().get(schemaId);
    if (reader == null) {
      return null;
    }
    bytes = DecoderFactory.get().binaryDecoder(datum, bytes);
    try {
      return reader.read(bytes);
    } catch (IOException | RuntimeException e) { // a datum that is not one of this schema's
      return null;
    }
  }

  private Map<Integer, Reader> readers() {
    if (readers == null) {
      Schema reader = new Schema.Parser().parse(spec.reader);
      Map<Integer, Reader> built = new HashMap<>();
      for (Map.Entry<Integer, String> e : spec.writers.entrySet()) {
        Schema writer = new Schema.Parser().parse(e.getValue());
        try {
          built.put(e.getKey(), new Reader(writer, reader, dataType));
        } catch (IOException ex) {
          throw new IllegalArgumentException("writer schema " + e.getKey() + ": " + ex.getMessage(), ex);
        }
      }
      readers = built;
    }
    return readers;
  }

  @Override
  public Object eval(InternalRow input) {
    Object schemaId = id.eval(input);
    Object datum = schemaId == null ? null : payload.eval(input);
    return datum == null ? null : decode((Integer) schemaId, (byte[]) datum);
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    return CodegenFallback.super.doGenCode(ctx, ev);
  }

  @Override
  public scala.collection.immutable.Seq<Expression> children() {
    return children;
  }

  @Override
  public DataType dataType() {
    return dataType;
  }

  @Override
  public boolean nullable() {
    return true;
  }

  @Override
  public Expression withNewChildrenInternal(scala.collection.immutable.IndexedSeq<Expression> children) {
    return new AvroRows(children.apply(0), children.apply(1), spec);
  }

  @Override
  public String prettyName() {
    return "dagger_avro";
  }

  @Override
  public int productArity() {
    return 3;
  }

  @Override
  public Object productElement(int n) {
    return switch (n) {
      case 0 -> id;
      case 1 -> payload;
      case 2 -> spec;
      default -> throw new IndexOutOfBoundsException(n);
    };
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof AvroRows;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof AvroRows a && id.equals(a.id) && payload.equals(a.payload) && spec.equals(a.spec);
  }

  @Override
  public int hashCode() {
    return Objects.hash(id, payload, spec);
  }

  /** One writer schema's reading: resolved against the reader when they differ, straight when they do not. */
  private static final class Reader {
    private final ResolvingDecoder resolving;
    private final Read read;

    Reader(Schema writer, Schema reader, StructType type) throws IOException {
      this.resolving = writer.equals(reader) ? null : DecoderFactory.get().resolvingDecoder(writer, reader, null);
      this.read = build(reader, type, resolving != null, true);
    }

    Object read(BinaryDecoder in) throws IOException {
      if (resolving == null) {
        return read.read(in);
      }
      resolving.configure(in);
      Object row = read.read(resolving);
      resolving.drain(); // the writer's fields after the reader's last are skipped here
      return row;
    }
  }

  /** How one Avro value becomes its Spark value. */
  private interface Read {
    Object read(Decoder in) throws IOException;
  }

  private static Read build(Schema schema, DataType type, boolean resolving, boolean top) {
    LogicalType logical = schema.getLogicalType();
    switch (schema.getType()) {
      case RECORD:
        return record(schema, (StructType) type, resolving, top);
      case ARRAY: {
        Read item = build(schema.getElementType(), ((ArrayType) type).elementType(), resolving, false);
        return in -> {
          List<Object> items = new ArrayList<>();
          for (long n = in.readArrayStart(); n != 0; n = in.arrayNext()) {
            for (long i = 0; i < n; i++) {
              items.add(item.read(in));
            }
          }
          return new GenericArrayData(items.toArray());
        };
      }
      case MAP: {
        Read value = build(schema.getValueType(), ((MapType) type).valueType(), resolving, false);
        return in -> {
          List<Object> keys = new ArrayList<>();
          List<Object> values = new ArrayList<>();
          for (long n = in.readMapStart(); n != 0; n = in.mapNext()) {
            for (long i = 0; i < n; i++) {
              keys.add(string(in.readString(null)));
              values.add(value.read(in));
            }
          }
          return new ArrayBasedMapData(new GenericArrayData(keys.toArray()), new GenericArrayData(values.toArray()));
        };
      }
      case UNION:
        return union(schema, type, resolving);
      case ENUM: {
        UTF8String[] symbols =
            schema.getEnumSymbols().stream().map(UTF8String::fromString).toArray(UTF8String[]::new);
        return in -> symbols[in.readEnum()];
      }
      case FIXED: {
        int size = schema.getFixedSize();
        if (logical instanceof LogicalTypes.Decimal d) {
          return in -> {
            byte[] b = new byte[size];
            in.readFixed(b, 0, size);
            return decimal(b, d);
          };
        }
        return in -> {
          byte[] b = new byte[size];
          in.readFixed(b, 0, size);
          return b;
        };
      }
      case BYTES:
        if (logical instanceof LogicalTypes.Decimal d) {
          return in -> decimal(bytes(in.readBytes(null)), d);
        }
        return in -> bytes(in.readBytes(null));
      case STRING:
        return in -> string(in.readString(null));
      case INT:
        return in -> in.readInt();
      case LONG:
        if (logical instanceof LogicalTypes.TimestampMillis || logical instanceof LogicalTypes.LocalTimestampMillis) {
          return in -> Math.multiplyExact(in.readLong(), 1000L);
        }
        if (logical instanceof LogicalTypes.TimeMicros) {
          return in -> Math.multiplyExact(in.readLong(), 1000L); // TIME's value is nanoseconds of the day
        }
        return in -> in.readLong();
      case FLOAT:
        return in -> in.readFloat();
      case DOUBLE:
        return in -> in.readDouble();
      case BOOLEAN:
        return in -> in.readBoolean();
      case NULL:
        return in -> {
          in.readNull();
          return null;
        };
      default:
        throw new IllegalArgumentException("an Avro type Dagger does not read: " + schema);
    }
  }

  private static Read record(Schema schema, StructType type, boolean resolving, boolean top) {
    List<Schema.Field> fields = schema.getFields();
    Schema.Field[] order = fields.toArray(new Schema.Field[0]);
    Read[] reads = new Read[order.length];
    for (int i = 0; i < order.length; i++) {
      reads[i] = build(order[i].schema(), type.fields()[i].dataType(), resolving, false);
    }
    int width = type.fields().length; // the top row's last field is the decoded flag
    return in -> {
      Schema.Field[] got = resolving ? ((ResolvingDecoder) in).readFieldOrder() : order;
      GenericInternalRow row = new GenericInternalRow(width);
      for (Schema.Field f : got) {
        int pos = f.pos();
        row.update(pos, reads[pos].read(in));
      }
      if (top) {
        row.setBoolean(width - 1, true);
      }
      return row;
    };
  }

  private static Read union(Schema schema, DataType type, boolean resolving) {
    List<Schema> branches = schema.getTypes();
    Read[] reads = new Read[branches.size()];
    int members = 0;
    for (Schema b : branches) {
      members += b.getType() == Schema.Type.NULL ? 0 : 1;
    }
    if (members == 1 || type instanceof LongType || type instanceof DoubleType) { // nullable, or widened
      for (int i = 0; i < reads.length; i++) {
        Schema b = branches.get(i);
        Read r = build(b, members == 1 ? type : b.getType() == Schema.Type.INT || b.getType() == Schema.Type.LONG
            ? org.apache.spark.sql.types.DataTypes.LongType : org.apache.spark.sql.types.DataTypes.DoubleType,
            resolving, false);
        if (type instanceof LongType && b.getType() == Schema.Type.INT) {
          reads[i] = in -> (long) (Integer) r.read(in);
        } else if (type instanceof DoubleType && b.getType() == Schema.Type.FLOAT) {
          reads[i] = in -> (double) (Float) r.read(in);
        } else {
          reads[i] = r;
        }
      }
    } else { // a struct of the members: the branch taken is set
      StructType struct = (StructType) type;
      int member = 0;
      for (int i = 0; i < reads.length; i++) {
        Schema b = branches.get(i);
        if (b.getType() == Schema.Type.NULL) {
          reads[i] = build(b, null, resolving, false);
          continue;
        }
        int at = member++;
        Read r = build(b, struct.fields()[at].dataType(), resolving, false);
        int width = struct.fields().length;
        reads[i] = in -> {
          GenericInternalRow row = new GenericInternalRow(width);
          row.update(at, r.read(in));
          return row;
        };
      }
    }
    return in -> reads[in.readIndex()].read(in);
  }

  private static UTF8String string(Utf8 s) {
    return UTF8String.fromBytes(s.getBytes(), 0, s.getByteLength());
  }

  private static byte[] bytes(ByteBuffer b) {
    byte[] out = new byte[b.remaining()];
    b.get(out);
    return out;
  }

  private static Decimal decimal(byte[] b, LogicalTypes.Decimal d) {
    return Decimal.apply(new BigDecimal(new BigInteger(b), d.getScale()), d.getPrecision(), d.getScale());
  }
}
