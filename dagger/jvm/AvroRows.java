package dagger.avro;

import java.io.IOException;
import java.io.Serializable;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import org.apache.avro.AvroTypeException;
import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Resolver;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.EncoderFactory;
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
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Avro datums → Spark rows, in the JVM: the Catalyst expression behind Dagger's Avro input
 * (dagger/formats/avro/decode.py builds it with {@link #column}).
 *
 * <p>Its children are a record's writer schema id (INT) and its payload (BINARY, the datum without Confluent's
 * header); its value is the record as the reader schema's row, whose last field (the decoded flag) is true, or
 * null when the id is not one of the writers given or the payload does not decode (too short, a bad union
 * index, a negative length...). Each writer is resolved against the reader by Avro's own rules ({@link
 * Resolver}: fields added with defaults, fields removed, promotions, enum and union branches mapped), once per
 * task; each datum is then read straight from its bytes ({@link Cursor}), with no grammar to walk per value.
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
    final int header;
    final String reader;
    final String type;
    final HashMap<Integer, String> writers;

    Spec(int header, String reader, String type, HashMap<Integer, String> writers) {
      this.header = header;
      this.reader = reader;
      this.type = type;
      this.writers = writers;
    }

    @Override
    public boolean equals(Object other) {
      return other instanceof Spec s
          && header == s.header
          && reader.equals(s.reader)
          && type.equals(s.type)
          && writers.equals(s.writers);
    }

    @Override
    public int hashCode() {
      return Objects.hash(header, reader, type, writers);
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
  private transient int lastId;
  private transient Reader last;
  private transient Cursor cursor;

  public AvroRows(Expression id, Expression payload, Spec spec) {
    this.id = id;
    this.payload = payload;
    this.spec = spec;
    this.dataType = (StructType) DataType.fromJson(spec.type);
    this.children = scala.jdk.javaapi.CollectionConverters.asScala(List.of(id, payload)).toSeq();
  }

  /**
   * The column of rows decoded from {@code payload}, past its first {@code header} bytes (Confluent's framing, read
   * by the Python reader), by the writer schema {@code id} names. {@code writers} maps ids to writer schemas' JSON; {@code type} is the row's Spark type as JSON (the reader's fields, then a
   * boolean). Runs on the driver; every writer is parsed and resolved here once, so a schema Avro refuses fails
   * the planning, not a task.
   */
  public static Column column(Column id, Column payload, int header, String reader, String type, Map<?, ?> writers) {
    HashMap<Integer, String> ids = new HashMap<>();
    for (Map.Entry<?, ?> e : writers.entrySet()) {
      ids.put(Integer.valueOf(e.getKey().toString()), e.getValue().toString());
    }
    Spec spec = new Spec(header, reader, type, ids);
    AvroRows rows = new AvroRows(ExpressionUtils.expression(id), ExpressionUtils.expression(payload), spec);
    rows.readers();
    return ExpressionUtils.column(rows);
  }

  /** Runs on the executors, once per record: the row, or null. */
  public Object decode(int schemaId, byte[] datum) {
    if (last == null || schemaId != lastId) {
      last = readers().get(schemaId);
      lastId = schemaId;
      if (last == null) {
        return null;
      }
      cursor = cursor == null ? new Cursor() : cursor;
    }
    cursor.buf = datum;
    cursor.pos = spec.header;
    try {
      return last.read.read(cursor);
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
        built.put(e.getKey(), new Reader(writer, reader, dataType));
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

  /**
   * Not deterministic to the optimizer, though it is: an expression that is not is evaluated where it stands. A
   * filter on a decoded field would otherwise be pushed below the projection that decodes, and every record be
   * decoded twice, once for the filter and once for the row (as {@code from_avro}'s records are).
   */
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

  /** One writer schema's reading: Avro's {@link Resolver} decides once, here, what each value the writer wrote
   * becomes in the reader's row (read, promoted, skipped, mapped to another enum symbol or union branch) and which
   * of the reader's fields take their default. */
  private static final class Reader {
    final Read read;

    Reader(Schema writer, Schema reader, StructType type) {
      this.read = build(Resolver.resolve(writer, reader), type);
    }
  }

  /** How one Avro value becomes its Spark value. */
  private interface Read {
    Object read(Cursor in) throws IOException;
  }

  private static Read build(Resolver.Action action, DataType type) {
    switch (action.type) {
      case RECORD:
        return record((Resolver.RecordAdjust) action, (StructType) type);
      case CONTAINER: {
        Resolver.Action items = ((Resolver.Container) action).elementAction;
        if (action.reader.getType() == Schema.Type.ARRAY) {
          return array(build(items, ((ArrayType) type).elementType()));
        }
        return map(build(items, ((MapType) type).valueType()));
      }
      case ENUM: {
        int[] adjustments = ((Resolver.EnumAdjust) action).adjustments;
        UTF8String[] symbols =
            action.reader.getEnumSymbols().stream().map(UTF8String::fromString).toArray(UTF8String[]::new);
        return in -> {
          int symbol = adjustments[in.readInt()];
          if (symbol < 0) {
            throw new AvroTypeException("an enum symbol the reader schema does not have, and no default");
          }
          return symbols[symbol];
        };
      }
      case WRITER_UNION: {
        Resolver.WriterUnion union = (Resolver.WriterUnion) action;
        Read[] branches = new Read[union.actions.length];
        for (int i = 0; i < branches.length; i++) { // the same union: branch i is the reader's branch i
          branches[i] = union.unionEquiv ? branch(action.reader, i, type, union.actions[i]) : build(union.actions[i], type);
        }
        return in -> branches[in.readInt()].read(in);
      }
      case READER_UNION: {
        Resolver.ReaderUnion union = (Resolver.ReaderUnion) action;
        return branch(action.reader, union.firstMatch, type, union.actualAction);
      }
      case SKIP: {
        Skip skip = skipper(action.writer);
        return in -> {
          skip.skip(in);
          return null;
        };
      }
      case DO_NOTHING:
      case PROMOTE:
        return primitive(action.writer.getType(), action.reader);
      case ERROR:
      default: {
        String why = action.toString();
        return in -> {
          throw new AvroTypeException(why);
        };
      }
    }
  }

  /** The reader's union, branch {@code at}: nullable, widened (int and long, float and double), or one member. */
  private static Read branch(Schema union, int at, DataType type, Resolver.Action action) {
    List<Schema> branches = union.getTypes();
    Schema.Type kind = branches.get(at).getType();
    if (kind == Schema.Type.NULL) {
      return build(action, type);
    }
    int member = 0;
    int members = 0;
    for (int i = 0; i < branches.size(); i++) {
      if (branches.get(i).getType() != Schema.Type.NULL) {
        member += i < at ? 1 : 0;
        members++;
      }
    }
    if (members == 1) {
      return build(action, type);
    }
    if (type instanceof LongType && kind == Schema.Type.INT) {
      Read read = build(action, DataTypes.IntegerType);
      return in -> (long) (Integer) read.read(in);
    }
    if (type instanceof DoubleType && kind == Schema.Type.FLOAT) {
      Read read = build(action, DataTypes.FloatType);
      return in -> (double) (Float) read.read(in);
    }
    if (type instanceof LongType || type instanceof DoubleType) {
      return build(action, type);
    }
    StructType struct = (StructType) type;
    int width = struct.fields().length;
    int index = member;
    Read read = build(action, struct.fields()[index].dataType());
    return in -> {
      GenericInternalRow row = new GenericInternalRow(width);
      row.update(index, read.read(in));
      return row;
    };
  }

  private static Read record(Resolver.RecordAdjust action, StructType type) {
    Resolver.Action[] fields = action.fieldActions; // the writer's fields, in its order
    Read[] reads = new Read[fields.length];
    int[] positions = new int[fields.length]; // where each lands in the reader's row; -1: skipped
    int next = 0;
    for (int i = 0; i < fields.length; i++) {
      if (fields[i].type == Resolver.Action.Type.SKIP) {
        positions[i] = -1;
      } else {
        positions[i] = action.readerOrder[next++].pos();
      }
      reads[i] = build(fields[i], positions[i] < 0 ? null : type.fields()[positions[i]].dataType());
    }
    int defaulted = action.readerOrder.length - action.firstDefault; // the reader's fields no writer field feeds
    int[] defaultAt = new int[defaulted];
    Object[] defaults = new Object[defaulted];
    for (int k = 0; k < defaulted; k++) {
      Schema.Field field = action.readerOrder[action.firstDefault + k];
      defaultAt[k] = field.pos();
      defaults[k] = defaultValue(field, action.defaults[k], type.fields()[field.pos()].dataType());
    }
    int width = type.fields().length;
    return in -> {
      GenericInternalRow row = new GenericInternalRow(width);
      for (int i = 0; i < reads.length; i++) {
        Object value = reads[i].read(in);
        if (positions[i] >= 0) {
          row.update(positions[i], value);
        }
      }
      for (int k = 0; k < defaultAt.length; k++) {
        row.update(defaultAt[k], defaults[k]);
      }
      return row;
    };
  }

  /** A reader field's default as Spark's value: Avro's own value of it, written and read back as any datum. */
  private static Object defaultValue(Schema.Field field, Object value, DataType type) {
    try {
      java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
      BinaryEncoder encoder = EncoderFactory.get().directBinaryEncoder(out, null);
      new GenericDatumWriter<Object>(field.schema(), GenericData.get()).write(value, encoder);
      encoder.flush();
      Cursor in = new Cursor();
      in.buf = out.toByteArray();
      return build(Resolver.resolve(field.schema(), field.schema()), type).read(in);
    } catch (IOException e) {
      throw new IllegalArgumentException("the default of field " + field.name() + ": " + e.getMessage(), e);
    }
  }

  private static Read array(Read item) {
    return in -> {
      List<Object> items = new ArrayList<>();
      for (long n = in.readBlock(); n != 0; n = in.readBlock()) {
        for (long i = 0; i < n; i++) {
          items.add(item.read(in));
        }
      }
      return new GenericArrayData(items.toArray());
    };
  }

  private static Read map(Read value) {
    return in -> {
      List<Object> keys = new ArrayList<>();
      List<Object> values = new ArrayList<>();
      for (long n = in.readBlock(); n != 0; n = in.readBlock()) {
        for (long i = 0; i < n; i++) {
          keys.add(in.readString());
          values.add(value.read(in));
        }
      }
      return new ArrayBasedMapData(new GenericArrayData(keys.toArray()), new GenericArrayData(values.toArray()));
    };
  }

  /** A value of the writer's primitive type {@code written}, as the reader's type (the same, or promoted to it),
   * with the reader's logical type. */
  private static Read primitive(Schema.Type written, Schema reader) {
    LogicalType logical = reader.getLogicalType();
    switch (reader.getType()) {
      case NULL:
        return in -> null;
      case BOOLEAN:
        return in -> in.readBoolean();
      case INT:
        return in -> in.readInt(); // date and time-millis too: days, milliseconds of the day
      case LONG: {
        boolean fromInt = written == Schema.Type.INT;
        if (logical instanceof LogicalTypes.TimestampMillis
            || logical instanceof LogicalTypes.LocalTimestampMillis
            || logical instanceof LogicalTypes.TimeMicros) { // Spark's microseconds; TIME's nanoseconds
          return in -> Math.multiplyExact(fromInt ? in.readInt() : in.readLong(), 1000L);
        }
        return fromInt ? in -> (long) in.readInt() : in -> in.readLong();
      }
      case FLOAT:
        switch (written) {
          case INT:
            return in -> (float) in.readInt();
          case LONG:
            return in -> (float) in.readLong();
          default:
            return in -> in.readFloat();
        }
      case DOUBLE:
        switch (written) {
          case INT:
            return in -> (double) in.readInt();
          case LONG:
            return in -> (double) in.readLong();
          case FLOAT:
            return in -> (double) in.readFloat();
          default:
            return in -> in.readDouble();
        }
      case STRING:
        if (written == Schema.Type.BYTES) {
          return in -> UTF8String.fromBytes(in.readBytes());
        }
        return in -> in.readString();
      case BYTES: {
        Read raw = in -> in.readBytes(); // a string's bytes too
        if (logical instanceof LogicalTypes.Decimal d) {
          return in -> decimal((byte[]) raw.read(in), d);
        }
        return raw;
      }
      case FIXED: {
        int size = reader.getFixedSize();
        Read raw = in -> {
          byte[] b = new byte[size];
          in.readFixed(b);
          return b;
        };
        if (logical instanceof LogicalTypes.Decimal d) {
          return in -> decimal((byte[]) raw.read(in), d);
        }
        return raw;
      }
      default:
        throw new IllegalArgumentException("not a primitive Avro type: " + reader);
    }
  }

  /** Skips one value of a writer's schema: the fields of the writer's records that the reader does not read. */
  private interface Skip {
    void skip(Cursor in) throws IOException;
  }

  private static Skip skipper(Schema schema) {
    switch (schema.getType()) {
      case NULL:
        return in -> {};
      case BOOLEAN:
        return in -> in.skip(1);
      case INT:
      case LONG:
      case ENUM:
        return in -> in.readLong();
      case FLOAT:
        return in -> in.skip(4);
      case DOUBLE:
        return in -> in.skip(8);
      case STRING:
      case BYTES:
        return in -> in.skip(in.readLength());
      case FIXED: {
        int size = schema.getFixedSize();
        return in -> in.skip(size);
      }
      case RECORD: {
        Skip[] fields = schema.getFields().stream().map(f -> skipper(f.schema())).toArray(Skip[]::new);
        return in -> {
          for (Skip f : fields) {
            f.skip(in);
          }
        };
      }
      case UNION: {
        Skip[] branches = schema.getTypes().stream().map(AvroRows::skipper).toArray(Skip[]::new);
        return in -> branches[in.readInt()].skip(in);
      }
      case ARRAY:
      case MAP: {
        boolean map = schema.getType() == Schema.Type.MAP;
        Skip item = skipper(map ? schema.getValueType() : schema.getElementType());
        return in -> {
          for (long n = in.readLong(); n != 0; n = in.readLong()) {
            if (n < 0) { // a block with its size in bytes: skipped whole
              in.skip(in.readLength());
              continue;
            }
            for (long i = 0; i < n; i++) {
              if (map) {
                in.skip(in.readLength());
              }
              item.skip(in);
            }
          }
        };
      }
      default:
        throw new IllegalArgumentException("an Avro type Dagger does not read: " + schema);
    }
  }

  /**
   * Avro's binary encoding read from one datum's bytes, as Avro's {@code BinaryDecoder} reads it, without its
   * buffering (the datum is whole in memory) and with strings that share the datum's bytes (a datum's array is
   * Spark's own copy of the payload, which nothing else writes to). Reading past the end throws.
   */
  private static final class Cursor {
    byte[] buf;
    int pos;

    long readLong() {
      long n = 0;
      int shift = 0;
      while (true) {
        int b = buf[pos++] & 0xff;
        n |= (long) (b & 0x7f) << shift;
        if (b < 0x80) {
          return (n >>> 1) ^ -(n & 1);
        }
        shift += 7;
        if (shift > 63) {
          throw new AvroTypeException("Invalid long encoding");
        }
      }
    }

    int readInt() {
      long n = readLong();
      if (n != (int) n) {
        throw new AvroTypeException("Invalid int encoding");
      }
      return (int) n;
    }

    boolean readBoolean() {
      return (buf[pos++] & 0xff) == 1;
    }

    float readFloat() {
      int bits = (buf[pos] & 0xff) | (buf[pos + 1] & 0xff) << 8 | (buf[pos + 2] & 0xff) << 16 | (buf[pos + 3] & 0xff) << 24;
      pos += 4;
      return Float.intBitsToFloat(bits);
    }

    double readDouble() {
      long bits = 0;
      for (int i = 7; i >= 0; i--) {
        bits = bits << 8 | (buf[pos + i] & 0xff);
      }
      pos += 8;
      return Double.longBitsToDouble(bits);
    }

    int readLength() {
      long n = readLong();
      if (n < 0 || n > buf.length - pos) {
        throw new AvroTypeException("a length of " + n + " bytes where " + (buf.length - pos) + " are left");
      }
      return (int) n;
    }

    UTF8String readString() {
      int n = readLength();
      UTF8String s = UTF8String.fromBytes(buf, pos, n);
      pos += n;
      return s;
    }

    byte[] readBytes() {
      int n = readLength();
      byte[] out = java.util.Arrays.copyOfRange(buf, pos, pos + n);
      pos += n;
      return out;
    }

    void readFixed(byte[] out) {
      System.arraycopy(buf, pos, out, 0, out.length);
      pos += out.length;
    }

    void skip(int n) {
      if (n > buf.length - pos) {
        throw new AvroTypeException("the datum ends before its values do");
      }
      pos += n;
    }

    /** An array's or map's next block: its count of items (0: the end), its size in bytes read past. */
    long readBlock() {
      long n = readLong();
      if (n < 0) {
        readLong();
        n = -n;
      }
      return n;
    }
  }

  private static Decimal decimal(byte[] b, LogicalTypes.Decimal d) {
    return Decimal.apply(new BigDecimal(new BigInteger(b), d.getScale()), d.getPrecision(), d.getScale());
  }
}
