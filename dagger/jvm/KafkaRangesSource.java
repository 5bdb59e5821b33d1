package dagger.kafka;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Dagger's Kafka source in the JVM: a Spark data source (format {@code dagger.kafka.KafkaRangesSource}) whose
 * records go from the Java Kafka client straight into Spark's rows, decoded in the JVM by the stream's format
 * (dagger/kafka/source/jvm.py builds the table). Its planning is Dagger's Kafka reader's, in Python on the driver
 * ({@link RangePlanner}, registered under the {@code planner} option's id before the query starts); its tasks are
 * {@link KafkaRangesReader}s, each reading the offset ranges the planner gave it with a consumer kept between
 * micro-batches.
 *
 * <p>Options: {@code planner} (the id), {@code table} (the stream, for messages), {@code kafka.<setting>} (the Java
 * consumer's settings), {@code unreachableMs} (how long a task waits for records it was promised before it fails),
 * {@code answerMs} (when it says so in the log), {@code timeFrom}/{@code timeUntil} (a time range of record
 * timestamps, ms, for {@code dagger run --from/--to}).
 *
 * <p>Its rows: {@code value}, {@code topic}, {@code partition}, {@code offset} (what Spark's Kafka source names them)
 * and {@code timestamp} (ms since the epoch). With {@code protobuf.message} (and {@code protobuf.descriptorSet},
 * base64; {@code protobuf.fields}, a JSON list of the fields to read; {@code protobuf.confluent}, a JSON object of
 * schema id to message-index path) each value is decoded as it is read ({@link dagger.proto.ProtoDecoder}) into the
 * stream's table ({@link KafkaRangesReader.TableSpec}: the fields, why a record was not read, the validity flag,
 * rowtime; the invalid-record policy applied).
 */
public final class KafkaRangesSource implements TableProvider {
  /** The rows a task emits. */
  public static final StructType SCHEMA = new StructType()
      .add("value", DataTypes.BinaryType, true)
      .add("topic", DataTypes.StringType, false)
      .add("partition", DataTypes.IntegerType, false)
      .add("offset", DataTypes.LongType, false)
      .add("timestamp", DataTypes.LongType, false);

  private static final Map<String, RangePlanner> PLANNERS = new ConcurrentHashMap<>();

  /** Called from Python on the driver before the query starts (and again by a restarted query). */
  public static void register(String id, RangePlanner planner) {
    PLANNERS.put(id, planner);
  }

  /** How many Kafka consumers this JVM's tasks have made: a task reuses the one kept for its partitions. */
  public static int consumersMade() {
    return KafkaRangesReader.consumersMade();
  }

  public static void unregister(String id) {
    PLANNERS.remove(id);
  }

  static RangePlanner planner(String id) {
    RangePlanner found = PLANNERS.get(id);
    if (found == null) {
      throw new IllegalStateException("SourceError: Dagger's Kafka planner " + id + " is not registered in this "
          + "JVM: the source runs only in a query started by dagger run (dagger/kafka/source/jvm.py)");
    }
    return found;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return schemaOf(options.asCaseSensitiveMap());
  }

  /** The protobuf decoder the options ask for, or null (the records' values as they are). Runs on the driver. */
  static dagger.proto.ProtoDecoder decoderOf(Map<String, String> options) {
    String message = options.get("protobuf.message");
    if (message == null) {
      return null;
    }
    byte[] set = java.util.Base64.getDecoder().decode(options.get("protobuf.descriptorSet"));
    try {
      ObjectMapper json = new ObjectMapper();
      List<?> fields = options.containsKey("protobuf.fields")
          ? json.readValue(options.get("protobuf.fields"), List.class) : null;
      Map<?, ?> confluent = options.containsKey("protobuf.confluent")
          ? json.readValue(options.get("protobuf.confluent"), Map.class) : null;
      return dagger.proto.ProtoDecoder.of(set, message, fields, confluent);
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("protobuf.fields and protobuf.confluent must be JSON", e);
    }
  }

  static StructType schemaOf(Map<String, String> options) {
    dagger.proto.ProtoDecoder decoder = decoderOf(options);
    return decoder == null ? SCHEMA : KafkaRangesReader.TableSpec.of(options, decoder).schema(decoder);
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new RangesTable(new HashMap<>(properties));
  }

  /** The stream as Spark's table: read in micro-batches only. */
  static final class RangesTable implements Table, SupportsRead {
    private final Map<String, String> options;
    private final StructType schema;

    RangesTable(Map<String, String> options) {
      this.options = options;
      this.schema = schemaOf(options);
    }

    @Override
    public String name() {
      return "DaggerKafka[" + options.getOrDefault("table", "?") + "]";
    }

    @Override
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return Set.of(TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap ignored) {
      return () -> new RangesScan(options, name(), schema);
    }
  }

  static final class RangesScan implements Scan {
    private final Map<String, String> options;
    private final String name;
    private final StructType schema;

    RangesScan(Map<String, String> options, String name, StructType schema) {
      this.options = options;
      this.name = name;
      this.schema = schema;
    }

    @Override
    public StructType readSchema() {
      return schema;
    }

    @Override
    public String description() {
      return name;
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      return new RangesStream(options);
    }
  }

  /** An offset: the planner's JSON, compared as text (as Spark compares a Python source's). */
  static final class JsonOffset extends Offset {
    private final String json;

    JsonOffset(String json) {
      this.json = json;
    }

    @Override
    public String json() {
      return json;
    }
  }

  /** The driver's side of a query: every call goes to the planner. */
  static final class RangesStream implements MicroBatchStream, SupportsTriggerAvailableNow {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final Map<String, String> options;
    private final String id;
    private Factory factory;

    RangesStream(Map<String, String> options) {
      this.options = options;
      this.id = options.get("planner");
    }

    private RangePlanner planner() {
      return KafkaRangesSource.planner(id);
    }

    @Override
    public Offset initialOffset() {
      return new JsonOffset(planner().initialOffset());
    }

    @Override
    public Offset deserializeOffset(String json) {
      return new JsonOffset(json);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
      long max = planner().defaultMaxRows();
      return max < 0 ? ReadLimit.allAvailable() : ReadLimit.maxRows(max);
    }

    @Override
    public Offset latestOffset() {
      throw new UnsupportedOperationException("latestOffset(start, limit) is the one Spark calls");
    }

    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
      long max = -1;
      if (limit instanceof ReadMaxRows rows) {
        max = rows.maxRows();
      } else if (!(limit instanceof ReadAllAvailable)) {
        throw new IllegalArgumentException("Dagger's Kafka source takes a row limit or none, not " + limit);
      }
      return new JsonOffset(planner().latestOffset(start.json(), max));
    }

    @Override
    public Offset reportLatestOffset() {
      String reported = planner().reportLatestOffset();
      return reported == null ? null : new JsonOffset(reported);
    }

    @Override
    public void prepareForTriggerAvailableNow() {
      planner().prepareForTriggerAvailableNow();
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
      String planned = planner().partitions(start.json(), end.json());
      List<InputPartition> tasks = new ArrayList<>();
      try {
        for (JsonNode task : JSON.readTree(planned)) {
          int n = task.size();
          String[] topics = new String[n];
          int[] partitions = new int[n];
          long[] from = new long[n];
          long[] until = new long[n];
          for (int i = 0; i < n; i++) {
            JsonNode range = task.get(i);
            topics[i] = range.get(0).asText();
            partitions[i] = range.get(1).asInt();
            from[i] = range.get(2).asLong();
            until[i] = range.get(3).asLong();
          }
          tasks.add(new Ranges(topics, partitions, from, until));
        }
      } catch (java.io.IOException e) {
        throw new IllegalStateException("the planner's partitions are not JSON: " + planned, e);
      }
      return tasks.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      // Spark asks once per micro-batch; the factory is the same each time (and each task gets its own copy)
      if (factory == null) {
        dagger.proto.ProtoDecoder decoder = decoderOf(options);
        KafkaRangesReader.TableSpec table = decoder == null ? null : KafkaRangesReader.TableSpec.of(options, decoder);
        factory = new Factory(KafkaRangesReader.Settings.of(options), decoder, table);
      }
      return factory;
    }

    @Override
    public void commit(Offset end) {
      planner().commit(end.json());
    }

    @Override
    public void stop() {
      RangePlanner found = PLANNERS.get(id);
      if (found != null) {
        found.stop();
      }
    }

    @Override
    public String toString() {
      return "DaggerKafka[" + options.getOrDefault("table", "?") + "]";
    }
  }

  /** What one task reads: offset ranges {@code [from, until)} of topic-partitions. */
  static final class Ranges implements InputPartition, Serializable {
    private static final long serialVersionUID = 1L;
    final String[] topics;
    final int[] partitions;
    final long[] from;
    final long[] until;

    Ranges(String[] topics, int[] partitions, long[] from, long[] until) {
      this.topics = topics;
      this.partitions = partitions;
      this.from = from;
      this.until = until;
    }
  }

  static final class Factory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final KafkaRangesReader.Settings settings;
    private final dagger.proto.ProtoDecoder decoder;
    private final KafkaRangesReader.TableSpec table;

    Factory(KafkaRangesReader.Settings settings, dagger.proto.ProtoDecoder decoder, KafkaRangesReader.TableSpec table) {
      this.settings = settings;
      this.decoder = decoder;
      this.table = table;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      // each task its own copy of the decoder (not thread-safe): the factory is deserialized once per task
      return new KafkaRangesReader(settings, (Ranges) partition, decoder, table);
    }
  }
}
