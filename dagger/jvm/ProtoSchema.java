package dagger.proto;

import java.io.Serializable;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.DescriptorValidationException;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.InvalidProtocolBufferException;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A protobuf message's shape as Dagger maps it onto Spark (docs/types.md, dagger/serde/types.py): built once, from a
 * serialized {@code FileDescriptorSet} and a message name, into the plans {@link ProtoRows} reads records with and
 * {@link ProtoBytes} writes them with.
 *
 * <p>The mapping, as the Python side's: int32, sint32, sfixed32 → INT; int64, sint64, sfixed64 → BIGINT; uint32,
 * fixed32 → BIGINT; uint64, fixed64 → DECIMAL(20,0); float, double, bool, string, bytes as themselves; enum → STRING
 * (the value's name, an unknown number as its digits); message → STRUCT of its fields in declaration order;
 * repeated → ARRAY; map → MAP; Timestamp → TIMESTAMP (µs); Duration → BIGINT (µs); the wrappers → the wrapped
 * scalar; Struct, Value, ListValue → STRING (JSON); a message type already on the path from the top → BINARY (its
 * serialized bytes). A field without presence (proto3's plain scalars) reads as its default when absent; a field
 * with presence (messages, proto2's optional fields, proto3 {@code optional}, oneof members) as NULL.
 *
 * <p>Runs on the driver (checking that the message exists, the output type) and in each task, once.
 */
final class ProtoSchema {
  private ProtoSchema() {}

  static final String TIMESTAMP = "google.protobuf.Timestamp";
  static final String DURATION = "google.protobuf.Duration";
  static final Set<String> JSON_TYPES =
      Set.of("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue");
  static final Set<String> WRAPPERS =
      Set.of(
          "google.protobuf.DoubleValue",
          "google.protobuf.FloatValue",
          "google.protobuf.Int64Value",
          "google.protobuf.UInt64Value",
          "google.protobuf.Int32Value",
          "google.protobuf.UInt32Value",
          "google.protobuf.BoolValue",
          "google.protobuf.StringValue",
          "google.protobuf.BytesValue");

  /** How one value is read from and written to the wire. */
  enum Kind {
    INT32, SINT32, SFIXED32, INT64, SINT64, SFIXED64, UINT32, FIXED32, UINT64, FIXED64, FLOAT, DOUBLE, BOOL,
    STRING, BYTES, ENUM, MESSAGE, GROUP, TIMESTAMP, DURATION, WRAPPER, STRUCT_JSON, VALUE_JSON, LIST_JSON, RECURSIVE;

    /** The wire type a single value of this kind is written with. */
    int wireType() {
      switch (this) {
        case INT32: case SINT32: case INT64: case SINT64: case UINT32: case UINT64: case BOOL: case ENUM:
          return 0;
        case FIXED64: case SFIXED64: case DOUBLE:
          return 1;
        case FIXED32: case SFIXED32: case FLOAT:
          return 5;
        case GROUP:
          return 3;
        default:
          return 2;
      }
    }

    /** Whether a repeated field of this kind may come packed. */
    boolean packable() {
      return wireType() != 2 && wireType() != 3;
    }
  }

  /** One message at one place in the tree (a message type under two paths gets two plans: recursion differs). */
  static final class MessagePlan implements Serializable {
    private static final long serialVersionUID = 1L;
    final String name;
    final boolean proto3;
    FieldPlan[] fields; // the output's fields, in declaration order
    private FieldPlan[] dense; // by field number, when the numbers are small
    private HashMap<Integer, FieldPlan> sparse;
    StructType type;
    Object[] absent; // each field's value when the record does not have it
    int repeated; // how many fields are repeated or maps (each gets a list in the reader's frame)
    transient FieldPlan[] writeOrder; // the fields by number: the order a writer writes them in

    MessagePlan(String name, boolean proto3) {
      this.name = name;
      this.proto3 = proto3;
    }

    FieldPlan field(int number) {
      if (dense != null) {
        return number < dense.length ? dense[number] : null;
      }
      return sparse.get(number);
    }

    void index() {
      int max = 0;
      for (FieldPlan f : fields) {
        max = Math.max(max, f.number);
      }
      if (max < 4096) {
        dense = new FieldPlan[max + 1];
        for (FieldPlan f : fields) {
          dense[f.number] = f;
        }
      } else {
        sparse = new HashMap<>();
        for (FieldPlan f : fields) {
          sparse.put(f.number, f);
        }
      }
    }
  }

  /** One field: where it lands in its message's row, and how its values are read and written. */
  static final class FieldPlan implements Serializable {
    private static final long serialVersionUID = 1L;
    final String name;
    final int number;
    final int slot;
    final Kind kind;
    final boolean repeated;
    final boolean packed; // written packed (read either way)
    final boolean presence; // NULL when absent (else: the default)
    int list = -1; // repeated: its list in the reader's frame
    int[] rivals; // a oneof's member: the slots of the other members, which a value of this one clears
    FieldPlan key; // a map's key (field 1 of the entry)
    FieldPlan value; // a map's value (field 2), or a wrapper's value
    MessagePlan message; // MESSAGE, GROUP
    UTF8String[] enumNames; // ENUM: by number, when the numbers are small and not negative
    HashMap<Integer, UTF8String> enumSparse;
    HashMap<UTF8String, Integer> enumNumbers; // ENUM: name → number (the writer)
    String enumName;
    String enumAccepted; // ENUM: its names, in number order (for the writer's errors)
    Shape shape; // RECURSIVE: the message type, for its bytes to be checked as protobuf checks them
    DataType type; // one value's Spark type (an ARRAY's element; a MAP's whole type)
    Object defaultValue; // one value's default: a scalar's zero (or proto2's declared default), an empty message

    FieldPlan(String name, int number, int slot, Kind kind, boolean repeated, boolean packed, boolean presence) {
      this.name = name;
      this.number = number;
      this.slot = slot;
      this.kind = kind;
      this.repeated = repeated;
      this.packed = packed;
      this.presence = presence;
    }

    boolean isMap() {
      return key != null;
    }

    /** The field's whole Spark type: ARRAY for a repeated field, the value's type otherwise. */
    DataType sparkType() {
      if (isMap()) {
        return type;
      }
      return repeated ? DataTypes.createArrayType(type, true) : type;
    }

    UTF8String enumName(int number) {
      UTF8String name = null;
      if (enumNames != null) {
        if (number >= 0 && number < enumNames.length) {
          name = enumNames[number];
        }
      } else {
        name = enumSparse.get(number);
      }
      return name != null ? name : UTF8String.fromString(Integer.toString(number));
    }
  }

  /**
   * What a message's bytes must be, where the mapping keeps them as bytes (a recursive message): which fields hold
   * strings (UTF-8) and which hold messages or groups, to be checked in turn. Message types refer to each other, so
   * shapes form a graph.
   */
  static final class Shape implements Serializable {
    private static final long serialVersionUID = 1L;
    final HashMap<Integer, Shape> messages = new HashMap<>();
    final HashMap<Integer, Shape> groups = new HashMap<>();
    final Set<Integer> strings = new HashSet<>();
  }

  static Shape shape(Descriptor d, Map<String, Shape> seen) {
    Shape known = seen.get(d.getFullName());
    if (known != null) {
      return known;
    }
    Shape shape = new Shape();
    seen.put(d.getFullName(), shape);
    for (FieldDescriptor f : d.getFields()) {
      switch (f.getType()) {
        case STRING:
          shape.strings.add(f.getNumber());
          break;
        case MESSAGE:
          shape.messages.put(f.getNumber(), shape(f.getMessageType(), seen));
          break;
        case GROUP:
          shape.groups.put(f.getNumber(), shape(f.getMessageType(), seen));
          break;
        default:
          break;
      }
    }
    return shape;
  }

  /** The descriptors of a serialized {@code FileDescriptorSet}, each file built once its imports are. */
  static Descriptor message(byte[] descriptorSet, String message) {
    FileDescriptorSet set;
    try {
      set = FileDescriptorSet.parseFrom(descriptorSet);
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalArgumentException("not a serialized FileDescriptorSet: " + e.getMessage(), e);
    }
    Map<String, FileDescriptorProto> protos = new HashMap<>();
    for (FileDescriptorProto file : set.getFileList()) {
      protos.putIfAbsent(file.getName(), file);
    }
    Map<String, FileDescriptor> built = new HashMap<>();
    List<String> names = new ArrayList<>();
    for (FileDescriptorProto file : set.getFileList()) {
      FileDescriptor fd = build(file.getName(), protos, built, new HashSet<>());
      Descriptor found = fd.findMessageTypeByName(simpleName(fd.getPackage(), message));
      if (found != null && found.getFullName().equals(message)) {
        return found;
      }
      if (!message.contains(".") || message.startsWith(fd.getPackage() + ".")) {
        Descriptor nested = nested(fd, message);
        if (nested != null) {
          return nested;
        }
      }
      names.add(file.getName());
    }
    throw new IllegalArgumentException("message " + message + " is not in the descriptor set (files: " + names + ")");
  }

  private static String simpleName(String pkg, String full) {
    return pkg.isEmpty() ? full : (full.startsWith(pkg + ".") ? full.substring(pkg.length() + 1) : full);
  }

  private static Descriptor nested(FileDescriptor fd, String full) {
    for (Descriptor d : fd.getMessageTypes()) {
      Descriptor found = nested(d, full);
      if (found != null) {
        return found;
      }
    }
    return null;
  }

  private static Descriptor nested(Descriptor d, String full) {
    if (d.getFullName().equals(full)) {
      return d;
    }
    for (Descriptor inner : d.getNestedTypes()) {
      Descriptor found = nested(inner, full);
      if (found != null) {
        return found;
      }
    }
    return null;
  }

  private static FileDescriptor build(
      String name, Map<String, FileDescriptorProto> protos, Map<String, FileDescriptor> built, Set<String> building) {
    FileDescriptor done = built.get(name);
    if (done != null) {
      return done;
    }
    FileDescriptorProto proto = protos.get(name);
    if (proto == null) {
      throw new IllegalArgumentException("the descriptor set lacks " + name + ", which another file imports");
    }
    if (!building.add(name)) {
      throw new IllegalArgumentException("the descriptor set's files import each other in a cycle at " + name);
    }
    List<FileDescriptor> deps = new ArrayList<>();
    for (String dep : proto.getDependencyList()) {
      deps.add(build(dep, protos, built, building));
    }
    try {
      FileDescriptor fd = FileDescriptor.buildFrom(proto, deps.toArray(new FileDescriptor[0]), true);
      built.put(name, fd);
      return fd;
    } catch (DescriptorValidationException e) {
      throw new IllegalArgumentException("descriptor file " + name + " is not valid: " + e.getMessage(), e);
    }
  }

  /**
   * The plan of {@code descriptor} as a table's records: all its fields, or those named in {@code keep} (the ones
   * the query reads; the others are skipped over as unknown fields are).
   */
  static MessagePlan plan(Descriptor descriptor, Set<String> keep) {
    List<String> path = new ArrayList<>();
    path.add(descriptor.getFullName());
    return plan(descriptor, path, keep);
  }

  private static MessagePlan plan(Descriptor descriptor, List<String> path, Set<String> keep) {
    MessagePlan plan = new MessagePlan(descriptor.getFullName(), isProto3(descriptor));
    List<FieldPlan> fields = new ArrayList<>();
    List<StructField> struct = new ArrayList<>();
    int lists = 0;
    for (FieldDescriptor f : descriptor.getFields()) {
      if (keep != null && !keep.contains(f.getName())) {
        continue;
      }
      FieldPlan field = field(f, fields.size(), path);
      if (field.repeated) {
        field.list = lists++;
      }
      fields.add(field);
      struct.add(new StructField(f.getName(), field.sparkType(), true, Metadata.empty()));
    }
    for (FieldPlan field : fields) { // a oneof has one member set: the last the record holds, as protobuf reads it
      FieldDescriptor f = descriptor.findFieldByNumber(field.number);
      if (f.getRealContainingOneof() == null) {
        continue;
      }
      List<Integer> rivals = new ArrayList<>();
      for (FieldPlan other : fields) {
        FieldDescriptor o = descriptor.findFieldByNumber(other.number);
        if (other != field && f.getRealContainingOneof().equals(o.getRealContainingOneof())) {
          rivals.add(other.slot);
        }
      }
      field.rivals = rivals.stream().mapToInt(Integer::intValue).toArray();
    }
    plan.fields = fields.toArray(new FieldPlan[0]);
    plan.type = new StructType(struct.toArray(new StructField[0]));
    plan.repeated = lists;
    plan.absent = new Object[plan.fields.length];
    for (FieldPlan field : plan.fields) {
      plan.absent[field.slot] = absent(field);
    }
    plan.index();
    return plan;
  }

  private static boolean isProto3(Descriptor descriptor) {
    return "proto3".equals(descriptor.getFile().toProto().getSyntax());
  }

  private static FieldPlan field(FieldDescriptor f, int slot, List<String> path) {
    boolean repeated = f.isRepeated();
    if (f.isMapField()) {
      Descriptor entry = f.getMessageType();
      FieldPlan map = new FieldPlan(f.getName(), f.getNumber(), slot, Kind.MESSAGE, true, false, false);
      map.key = single(entry.findFieldByNumber(1), 0, path, false, false);
      map.value = single(entry.findFieldByNumber(2), 1, path, false, false);
      map.type = new MapType(map.key.type, map.value.type, true);
      return map;
    }
    boolean presence = !repeated && f.hasPresence();
    return single(f, slot, path, repeated, presence);
  }

  private static FieldPlan single(FieldDescriptor f, int slot, List<String> path, boolean repeated, boolean presence) {
    Kind kind;
    DataType type;
    MessagePlan message = null;
    FieldPlan wrapped = null;
    Shape recursive = null;
    switch (f.getType()) {
      case INT32: kind = Kind.INT32; type = DataTypes.IntegerType; break;
      case SINT32: kind = Kind.SINT32; type = DataTypes.IntegerType; break;
      case SFIXED32: kind = Kind.SFIXED32; type = DataTypes.IntegerType; break;
      case INT64: kind = Kind.INT64; type = DataTypes.LongType; break;
      case SINT64: kind = Kind.SINT64; type = DataTypes.LongType; break;
      case SFIXED64: kind = Kind.SFIXED64; type = DataTypes.LongType; break;
      case UINT32: kind = Kind.UINT32; type = DataTypes.LongType; break;
      case FIXED32: kind = Kind.FIXED32; type = DataTypes.LongType; break;
      case UINT64: kind = Kind.UINT64; type = DataTypes.createDecimalType(20, 0); break;
      case FIXED64: kind = Kind.FIXED64; type = DataTypes.createDecimalType(20, 0); break;
      case FLOAT: kind = Kind.FLOAT; type = DataTypes.FloatType; break;
      case DOUBLE: kind = Kind.DOUBLE; type = DataTypes.DoubleType; break;
      case BOOL: kind = Kind.BOOL; type = DataTypes.BooleanType; break;
      case STRING: kind = Kind.STRING; type = DataTypes.StringType; break;
      case BYTES: kind = Kind.BYTES; type = DataTypes.BinaryType; break;
      case ENUM: kind = Kind.ENUM; type = DataTypes.StringType; break;
      case MESSAGE:
      case GROUP: {
        Descriptor d = f.getMessageType();
        String name = d.getFullName();
        if (name.equals(TIMESTAMP)) {
          kind = Kind.TIMESTAMP;
          type = DataTypes.TimestampType;
        } else if (name.equals(DURATION)) {
          kind = Kind.DURATION;
          type = DataTypes.LongType;
        } else if (JSON_TYPES.contains(name)) {
          kind = name.endsWith("Struct") ? Kind.STRUCT_JSON : name.endsWith("ListValue") ? Kind.LIST_JSON : Kind.VALUE_JSON;
          type = DataTypes.StringType;
        } else if (WRAPPERS.contains(name)) {
          kind = Kind.WRAPPER;
          wrapped = single(d.findFieldByNumber(1), 0, path, false, false);
          type = wrapped.type;
        } else if (path.contains(name)) {
          kind = Kind.RECURSIVE;
          type = DataTypes.BinaryType;
          recursive = shape(d, new HashMap<>());
        } else {
          kind = f.getType() == FieldDescriptor.Type.GROUP ? Kind.GROUP : Kind.MESSAGE;
          List<String> deeper = new ArrayList<>(path);
          deeper.add(name);
          message = plan(d, deeper, null);
          type = message.type;
        }
        break;
      }
      default:
        throw new IllegalArgumentException("field " + f.getFullName() + " has a type Dagger does not map: " + f.getType());
    }
    boolean packed = repeated && kind.packable() && f.isPacked();
    FieldPlan plan = new FieldPlan(f.getName(), f.getNumber(), slot, kind, repeated, packed, presence);
    plan.type = type;
    plan.message = message;
    plan.value = wrapped;
    plan.shape = recursive;
    if (kind == Kind.ENUM) {
      enumValues(plan, f);
    }
    plan.defaultValue = defaultOf(plan, f);
    return plan;
  }

  private static void enumValues(FieldPlan plan, FieldDescriptor f) {
    List<EnumValueDescriptor> values = f.getEnumType().getValues();
    int max = -1;
    boolean negative = false;
    for (EnumValueDescriptor v : values) {
      max = Math.max(max, v.getNumber());
      negative |= v.getNumber() < 0;
    }
    plan.enumNumbers = new HashMap<>();
    if (!negative && max < 4096) {
      plan.enumNames = new UTF8String[max + 1];
    } else {
      plan.enumSparse = new HashMap<>();
    }
    for (EnumValueDescriptor v : values) { // the first name of a number wins (allow_alias): as protobuf's own
      UTF8String name = UTF8String.fromString(v.getName());
      if (plan.enumNames != null) {
        if (plan.enumNames[v.getNumber()] == null) {
          plan.enumNames[v.getNumber()] = name;
        }
      } else {
        plan.enumSparse.putIfAbsent(v.getNumber(), name);
      }
      plan.enumNumbers.putIfAbsent(name, v.getNumber());
    }
    plan.enumName = f.getEnumType().getFullName();
    plan.enumAccepted = String.join(", ", values.stream().map(EnumValueDescriptor::getName).toArray(String[]::new));
  }

  /** A scalar field's default (proto2's declared one, or proto3's zero), as Spark's value. */
  private static Object defaultOf(FieldPlan plan, FieldDescriptor f) {
    boolean scalar = plan.kind.wireType() != 2 && plan.kind != Kind.GROUP
        || plan.kind == Kind.STRING || plan.kind == Kind.BYTES;
    Object d = scalar && !f.isRepeated() ? f.getDefaultValue() : null; // a repeated field's element: the zero
    switch (plan.kind) {
      case INT32: case SINT32: case SFIXED32:
        return d == null ? (Integer) 0 : (Integer) d;
      case INT64: case SINT64: case SFIXED64:
        return d == null ? (Long) 0L : (Long) d;
      case UINT32: case FIXED32:
        return d == null ? 0L : ((Integer) d) & 0xFFFFFFFFL;
      case UINT64: case FIXED64:
        return unsigned(d == null ? 0L : (Long) d);
      case FLOAT:
        return d == null ? (Float) 0f : (Float) d;
      case DOUBLE:
        return d == null ? (Double) 0d : (Double) d;
      case BOOL:
        return d == null ? Boolean.FALSE : (Boolean) d;
      case STRING:
        return UTF8String.fromString(d == null ? "" : (String) d);
      case BYTES:
        return d == null ? new byte[0] : ((com.google.protobuf.ByteString) d).toByteArray();
      case ENUM:
        return plan.enumName(d == null ? f.getEnumType().getValues().get(0).getNumber()
            : ((EnumValueDescriptor) d).getNumber());
      case TIMESTAMP: case DURATION:
        return 0L;
      case WRAPPER:
        return plan.value.defaultValue;
      case STRUCT_JSON:
        return UTF8String.fromString("{}");
      case LIST_JSON:
        return UTF8String.fromString("[]");
      case VALUE_JSON:
        return UTF8String.fromString("null");
      case RECURSIVE:
        return new byte[0];
      default: // MESSAGE, GROUP: the message with every field absent
        return new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(plan.message.absent.clone());
    }
  }

  /** What a row holds for a field its record does not have. */
  private static Object absent(FieldPlan field) {
    if (field.isMap()) {
      return new org.apache.spark.sql.catalyst.util.ArrayBasedMapData(
          new org.apache.spark.sql.catalyst.util.GenericArrayData(new Object[0]),
          new org.apache.spark.sql.catalyst.util.GenericArrayData(new Object[0]));
    }
    if (field.repeated) {
      return new org.apache.spark.sql.catalyst.util.GenericArrayData(new Object[0]);
    }
    return field.presence ? null : field.defaultValue;
  }

  /** An unsigned 64-bit value as DECIMAL(20,0). */
  static Decimal unsigned(long value) {
    if (value >= 0) {
      return Decimal.apply(value);
    }
    BigDecimal big = new BigDecimal(new java.math.BigInteger(Long.toUnsignedString(value)));
    return Decimal.apply(big, 20, 0);
  }

  /** The Spark type of a table's records with the reader's error column last. */
  static StructType withError(StructType record, String error) {
    return record.add(error, DataTypes.StringType, true);
  }

  static ArrayType arrayOf(DataType type) {
    return DataTypes.createArrayType(type, true);
  }
}
