package dagger.proto;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import dagger.proto.ProtoSchema.MessagePlan;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Dagger's protobuf decoder for one message (the fields a query reads): each record's bytes, past Confluent's header
 * where the stream has one, into a Spark row of the message's fields and a last field, {@link ProtoRows#ERROR}
 * (null for a record that was read, else why it could not be; its fields are then null). Never an exception for a
 * record: random bytes make an error string, not a failed task. Shared by the {@link ProtoRows} expression and by
 * Dagger's Kafka source in the JVM, which decodes as it reads ({@code dagger.kafka.KafkaRangesReader}).
 *
 * <p>Built on the driver (the descriptors are resolved there, so a bad set fails the planning) and serialized to
 * the executors; each copy plans the message once, at its first record. Not thread-safe: one per task.
 */
public final class ProtoDecoder implements Serializable {
  private static final long serialVersionUID = 1L;

  final ProtoRows.Spec spec;
  private transient ProtoReader reader;
  private transient int width;

  ProtoDecoder(ProtoRows.Spec spec) {
    this.spec = spec;
  }

  /**
   * A decoder of {@code message} records in {@code descriptorSet} (a serialized FileDescriptorSet holding its file
   * and imports), reading only {@code fields} (null: all); {@code confluent} (null for none) maps schema ids to the
   * message's index path in that version's file. Runs on the driver: a message the set lacks fails here.
   */
  public static ProtoDecoder of(byte[] descriptorSet, String message, List<?> fields, Map<?, ?> confluent) {
    ProtoDecoder decoder = new ProtoDecoder(new ProtoRows.Spec(descriptorSet, message, ProtoRows.names(fields),
        ProtoRows.paths(confluent)));
    decoder.type();
    return decoder;
  }

  /** The Spark type of a decoded record: the (read) fields, then {@link ProtoRows#ERROR}. */
  public StructType type() {
    return ProtoSchema.withError(spec.type(), ProtoRows.ERROR);
  }

  /** Runs on the executors, once per record: the row, or a row holding only why it could not be read. */
  public GenericInternalRow decode(byte[] record, int from) {
    return decode(record, from, 0);
  }

  /**
   * {@link #decode(byte[], int)} with {@code extra} null slots after the error's: room for the columns a reader adds
   * to each row without copying it.
   */
  public GenericInternalRow decode(byte[] record, int from, int extra) {
    ProtoReader reader = reader();
    try {
      int at = from;
      if (spec.confluent != null) {
        at = header(record);
      }
      if (at < 0 || at > record.length) {
        return failed("the message starts at byte " + at + " of a " + record.length + "-byte record", extra);
      }
      try {
        return reader.read(record, at, 1 + extra);
      } catch (ProtoReader.Failure e) {
        return failed("not a valid " + spec.message + ": " + e.getMessage(), extra);
      }
    } catch (ProtoReader.Failure e) { // the header
      return failed(e.getMessage(), extra);
    } catch (RuntimeException e) { // a record no rule foresaw: still the record's, never the task's, failure
      return failed("not a valid " + spec.message + ": unreadable (" + e + ")", extra);
    }
  }

  /** How many fields a decoded row has before its error. */
  public int width() {
    reader();
    return width;
  }

  /** Whether records carry Confluent's header, read here. */
  public boolean confluent() {
    return spec.confluent != null;
  }

  private ProtoReader reader() {
    if (reader == null) {
      MessagePlan plan = spec.plan();
      reader = new ProtoReader(plan);
      width = plan.fields.length;
    }
    return reader;
  }

  public GenericInternalRow failed(String why) {
    return failed(why, 0);
  }

  /** A row of nulls but for why the record could not be read ({@code extra} slots after it). */
  public GenericInternalRow failed(String why, int extra) {
    reader();
    Object[] values = new Object[width + 1 + extra];
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

}
