package dagger.kafka;

import java.io.Serializable;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.unsafe.types.UTF8String;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One task of Dagger's Kafka source in the JVM ({@link KafkaRangesSource}): reads its offset ranges with the Java
 * Kafka client into Spark's rows. Runs on an executor.
 *
 * <p>Its consumer is kept between micro-batches (one per set of topic-partitions a task reads, so the next
 * micro-batch's task finds its positions and whatever was fetched ahead): a task seeks only where a range does not
 * start where the consumer stands, and records fetched past a range's end are kept for the range that starts
 * there. All of a task's partitions are fetched together, in one request per broker. A range ends at its end offset
 * or where the consumer's position passes it (offsets may have gaps: compaction, transaction markers). A task
 * that gets nothing for {@code unreachableMs} fails saying what it waited for; nothing is lost (its micro-batch is
 * not committed).
 */
final class KafkaRangesReader implements PartitionReader<InternalRow> {
  private static final Logger LOG = LoggerFactory.getLogger(KafkaRangesReader.class);
  private static final long POLL_MS = 100;
  /** Consumers kept beyond this many are closed, the longest unused first. */
  private static final int POOL_LIMIT = 64;
  /** A consumer unused for this long is closed. */
  private static final long IDLE_MS = 10 * 60 * 1000L;

  /** What every task of a stream's query shares: the consumer's settings and its waits. */
  static final class Settings implements Serializable {
    private static final long serialVersionUID = 1L;
    final TreeMap<String, String> kafka;
    final String table;
    final long unreachableMs;
    final long answerMs;
    final long timeFrom;
    final long timeUntil;
    final boolean keepValue;

    Settings(TreeMap<String, String> kafka, String table, long unreachableMs, long answerMs, long timeFrom,
        long timeUntil, boolean keepValue) {
      this.kafka = kafka;
      this.table = table;
      this.unreachableMs = unreachableMs;
      this.answerMs = answerMs;
      this.timeFrom = timeFrom;
      this.timeUntil = timeUntil;
      this.keepValue = keepValue;
    }

    static Settings of(Map<String, String> options) {
      TreeMap<String, String> kafka = new TreeMap<>();
      for (Map.Entry<String, String> e : options.entrySet()) {
        if (e.getKey().startsWith("kafka.")) {
          kafka.put(e.getKey().substring("kafka.".length()), e.getValue());
        }
      }
      return new Settings(kafka, options.getOrDefault("table", "?"),
          Long.parseLong(options.getOrDefault("unreachableMs", "600000")),
          Long.parseLong(options.getOrDefault("answerMs", "5000")),
          Long.parseLong(options.getOrDefault("timeFrom", String.valueOf(Long.MIN_VALUE))),
          Long.parseLong(options.getOrDefault("timeUntil", String.valueOf(Long.MAX_VALUE))),
          Boolean.parseBoolean(options.getOrDefault("keepValue", "false")));
    }

    String brokers() {
      return kafka.getOrDefault("bootstrap.servers", "?");
    }
  }

  /**
   * The stream's table, when the reader decodes: options {@code table.name} (the stream's table, for messages),
   * {@code table.policy} (fail or drop: a stream with dead letters is read in Python workers), {@code table.validity} and {@code table.rowtime} (the two
   * columns' names), {@code table.rowtimeField} (the decoded Timestamp field rowtime is, none: rowtime is null).
   * Each row: the decoded fields, {@code __dagger_reason} (why the record was not read, null where it was), the
   * validity flag and rowtime (the field's time; the epoch where it is null or the record invalid). Under {@code fail} an
   * undecodable record ends the task naming where it is; a Confluent schema id the job did not read at start does
   * under any policy (a version registered since: a restart reads it).
   */
  static final class TableSpec implements Serializable {
    private static final long serialVersionUID = 1L;
    static final String REASON = "__dagger_reason";
    final String table;
    final String policy;
    final String validity;
    final String rowtime;
    final String rowtimeField;
    int rowtimeAt = -2; // computed on the driver (by of), travels with the spec

    TableSpec(String table, String policy, String validity, String rowtime, String rowtimeField) {
      this.table = table;
      this.policy = policy;
      this.validity = validity;
      this.rowtime = rowtime;
      this.rowtimeField = rowtimeField;
    }

    static TableSpec of(Map<String, String> options, dagger.proto.ProtoDecoder decoder) {
      TableSpec spec = new TableSpec(options.getOrDefault("table.name", options.getOrDefault("table", "?")),
          options.getOrDefault("table.policy", "fail"), options.getOrDefault("table.validity",
              "__internal_validation_field__"), options.getOrDefault("table.rowtime", "rowtime"),
          options.get("table.rowtimeField"));
      if (spec.rowtimeField != null && spec.rowtimeAt(decoder) < 0) {
        throw new IllegalArgumentException("table.rowtimeField " + spec.rowtimeField + " is not a decoded field");
      }
      return spec;
    }

    /** The slots a row has beyond the decoded fields and the reason: the validity flag and rowtime. */
    static final int EXTRA = 2;

    int rowtimeAt(dagger.proto.ProtoDecoder decoder) {
      if (rowtimeAt == -2) {
        rowtimeAt = rowtimeField == null ? -1 : java.util.Arrays.asList(decoder.type().fieldNames())
            .indexOf(rowtimeField);
      }
      return rowtimeAt;
    }

    org.apache.spark.sql.types.StructType schema(dagger.proto.ProtoDecoder decoder) {
      org.apache.spark.sql.types.StructType record = decoder.type();
      org.apache.spark.sql.types.StructType out = new org.apache.spark.sql.types.StructType();
      for (int i = 0; i < record.fields().length - 1; i++) {
        out = out.add(record.fields()[i]);
      }
      out = out.add(REASON, org.apache.spark.sql.types.DataTypes.StringType, true)
          .add(validity, org.apache.spark.sql.types.DataTypes.BooleanType, false)
          .add(rowtime, org.apache.spark.sql.types.DataTypes.TimestampType, true);
      return out;
    }
  }

  /** A consumer between tasks: its partitions' positions, and records fetched past a range's end. */
  static final class Pooled {
    private static final AtomicInteger COUNT = new AtomicInteger();
    final KafkaConsumer<byte[], byte[]> consumer;
    final Map<TopicPartition, ArrayDeque<ConsumerRecord<byte[], byte[]>>> ahead = new HashMap<>();
    final Set<TopicPartition> positioned = new HashSet<>();
    long lastUsed = System.currentTimeMillis();

    Pooled(Settings settings) {
      Properties props = new Properties();
      // defaults a stream's settings override: fetches of 4 MB a partition, CRCs unchecked as librdkafka (Dagger's
      // reader in Python workers) leaves them; with the sink's linger of 5 ms, 1.28x the throughput of the Java
      // client's defaults on 6M records here (bench/results/issue53/jvm_reader)
      props.put("max.poll.records", "10000");
      props.put("max.partition.fetch.bytes", "4194304");
      props.put("check.crcs", "false");
      // as librdkafka (and so Dagger's planner, whose latest offsets are the last stable ones): aborted records unread
      props.put("isolation.level", "read_committed");
      props.putAll(settings.kafka);
      props.remove("group.id"); // assigned partitions only: the group is the planner's, which commits
      props.put("enable.auto.commit", "false");
      props.put("auto.offset.reset", "none"); // every position is sought: an offset gone is an error, not a reset
      props.put("client.id", "dagger-" + settings.table + "-" + COUNT.incrementAndGet());
      props.put("key.deserializer", ByteArrayDeserializer.class.getName());
      props.put("value.deserializer", ByteArrayDeserializer.class.getName());
      consumer = new KafkaConsumer<>(props);
    }

    void close() {
      try {
        consumer.close(Duration.ZERO);
      } catch (RuntimeException e) {
        LOG.debug("closing a Kafka consumer", e);
      }
    }
  }

  private static final Map<String, ConcurrentLinkedDeque<Pooled>> POOL = new ConcurrentHashMap<>();

  private static Pooled borrow(String key, Settings settings) {
    long now = System.currentTimeMillis();
    evict(now);
    ConcurrentLinkedDeque<Pooled> free = POOL.get(key);
    Pooled found = free == null ? null : free.pollFirst();
    return found != null ? found : new Pooled(settings);
  }

  /** How many consumers this JVM's readers have made (each task that found none to reuse made one). */
  static int consumersMade() {
    return Pooled.COUNT.get();
  }

  private static void giveBack(String key, Pooled pooled) {
    pooled.lastUsed = System.currentTimeMillis();
    POOL.computeIfAbsent(key, k -> new ConcurrentLinkedDeque<>()).addFirst(pooled);
  }

  private static synchronized void evict(long now) {
    List<Pooled> all = new ArrayList<>();
    for (ConcurrentLinkedDeque<Pooled> free : POOL.values()) {
      all.addAll(free);
    }
    all.sort((a, b) -> Long.compare(b.lastUsed, a.lastUsed));
    for (int i = 0; i < all.size(); i++) {
      Pooled p = all.get(i);
      if (i >= POOL_LIMIT || now - p.lastUsed > IDLE_MS) {
        for (ConcurrentLinkedDeque<Pooled> free : POOL.values()) {
          if (free.remove(p)) {
            p.close();
          }
        }
      }
    }
  }

  private final Settings settings;
  private final KafkaRangesSource.Ranges ranges;
  private final String key;
  private final Pooled pooled;
  private final TopicPartition[] tps;
  private final UTF8String[] topicNames;
  private final boolean[] done;
  private final Map<TopicPartition, Integer> index = new HashMap<>();
  private final ArrayDeque<Object[]> pending = new ArrayDeque<>(); // {range index, records}
  private final UnsafeRowWriter writer = new UnsafeRowWriter(5, 256);
  private int left;
  private int at = -1; // the range of the records being handed out
  private Iterator<ConsumerRecord<byte[], byte[]>> records;
  private long lastProgress = System.currentTimeMillis();
  private boolean waiting;
  private boolean failed = true; // until the last range is read

  private final dagger.proto.ProtoDecoder decoder;
  private final TableSpec table;
  private final int width;
  private final int extra;
  private final int rowtimeAt;
  private InternalRow row;

  KafkaRangesReader(Settings settings, KafkaRangesSource.Ranges ranges, dagger.proto.ProtoDecoder decoder,
      TableSpec table) {
    this.settings = settings;
    this.decoder = decoder;
    this.table = table;
    this.width = decoder == null ? 0 : decoder.width();
    this.extra = table == null ? 0 : TableSpec.EXTRA;
    this.rowtimeAt = table == null ? -1 : table.rowtimeAt(decoder);
    this.ranges = ranges;
    int n = ranges.topics.length;
    tps = new TopicPartition[n];
    topicNames = new UTF8String[n];
    done = new boolean[n];
    StringBuilder name = new StringBuilder(settings.kafka.toString());
    List<TopicPartition> sorted = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      tps[i] = new TopicPartition(ranges.topics[i], ranges.partitions[i]);
      topicNames[i] = UTF8String.fromString(ranges.topics[i]);
      index.put(tps[i], i);
      sorted.add(tps[i]);
    }
    sorted.sort((a, b) -> a.toString().compareTo(b.toString()));
    key = name.append(sorted).toString();
    pooled = borrow(key, settings);
    KafkaConsumer<byte[], byte[]> consumer = pooled.consumer;
    if (!consumer.assignment().equals(new HashSet<>(sorted))) {
      consumer.assign(sorted);
      pooled.positioned.retainAll(sorted);
      pooled.ahead.keySet().retainAll(sorted);
    }
    consumer.resume(sorted);
    left = n;
    for (int i = 0; i < n; i++) {
      long from = ranges.from[i];
      ArrayDeque<ConsumerRecord<byte[], byte[]>> ahead = pooled.ahead.remove(tps[i]);
      if (ahead != null && !ahead.isEmpty() && ahead.peekFirst().offset() == from) {
        pending.add(new Object[] {i, ahead});
        continue;
      }
      if (!pooled.positioned.contains(tps[i]) || consumer.position(tps[i]) != from) {
        consumer.seek(tps[i], from);
        pooled.positioned.add(tps[i]);
      }
    }
  }

  @Override
  public boolean next() {
    while (true) {
      if (records != null) {
        while (records.hasNext()) {
          ConsumerRecord<byte[], byte[]> record = records.next();
          long offset = record.offset();
          if (offset < ranges.from[at]) {
            continue;
          }
          if (offset >= ranges.until[at]) { // fetched ahead: the next micro-batch's
            ArrayDeque<ConsumerRecord<byte[], byte[]>> ahead = new ArrayDeque<>();
            ahead.add(record);
            records.forEachRemaining(ahead::add);
            pooled.ahead.put(tps[at], ahead);
            finish(at);
            break;
          }
          if (offset == ranges.until[at] - 1) {
            finish(at);
          }
          long timestamp = record.timestamp();
          if (timestamp < settings.timeFrom || timestamp >= settings.timeUntil) {
            continue; // inside the offset range, outside the time range (timestamps out of order)
          }
          write(record, at, timestamp);
          return true;
        }
        records = null;
      }
      Object[] next = pending.pollFirst();
      if (next != null) {
        at = (Integer) next[0];
        if (done[at]) {
          continue;
        }
        @SuppressWarnings("unchecked")
        Iterable<ConsumerRecord<byte[], byte[]>> list = (Iterable<ConsumerRecord<byte[], byte[]>>) next[1];
        records = list.iterator();
        continue;
      }
      if (left == 0) {
        failed = false;
        return false;
      }
      poll();
    }
  }

  private void finish(int i) {
    if (!done[i]) {
      done[i] = true;
      left--;
      pooled.consumer.pause(List.of(tps[i]));
    }
  }

  private void poll() {
    KafkaConsumer<byte[], byte[]> consumer = pooled.consumer;
    for (int i = 0; i < tps.length; i++) { // a range whose last offsets hold no records ends at the position
      if (!done[i] && consumer.position(tps[i]) >= ranges.until[i]) {
        finish(i);
      }
    }
    if (left == 0) {
      return;
    }
    ConsumerRecords<byte[], byte[]> polled;
    try {
      polled = consumer.poll(Duration.ofMillis(POLL_MS));
    } catch (OffsetOutOfRangeException e) {
      throw new IllegalStateException("SourceError: stream '" + settings.table + "': offsets "
          + e.offsetOutOfRangePartitions() + " are no longer on the brokers " + settings.brokers()
          + " (deleted by the topic's retention before the job read them); the job cannot read what was planned", e);
    }
    long now = System.currentTimeMillis();
    if (!polled.isEmpty()) {
      lastProgress = now;
      if (waiting) {
        waiting = false;
        LOG.warn("stream '{}': the brokers {} answer again", settings.table, settings.brokers());
      }
      for (TopicPartition tp : polled.partitions()) {
        Integer i = index.get(tp);
        if (i != null) {
          pending.add(new Object[] {i, polled.records(tp)});
        }
      }
      return;
    }
    if (!waiting && now - lastProgress > settings.answerMs) {
      waiting = true;
      LOG.warn("stream '{}': the brokers {} do not answer: no records for {} s while {} are expected; waiting up to "
          + "{} s (SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS)", settings.table, settings.brokers(),
          settings.answerMs / 1000, expected(), settings.unreachableMs / 1000);
    }
    if (now - lastProgress > settings.unreachableMs) {
      throw new IllegalStateException("SourceError: stream '" + settings.table + "': no records on "
          + settings.brokers() + " for " + settings.unreachableMs / 1000 + " s (SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS) "
          + "while " + expected() + " were expected. Nothing was lost: a restart resumes from the checkpoint");
    }
  }

  private String expected() {
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < tps.length; i++) {
      if (!done[i]) {
        long position = pooled.consumer.position(tps[i]);
        out.append(out.length() == 0 ? "" : ", ").append(tps[i].topic()).append('[').append(tps[i].partition())
            .append("] offsets ").append(position).append("..").append(ranges.until[i] - 1);
      }
    }
    return out.toString();
  }

  private void write(ConsumerRecord<byte[], byte[]> record, int range, long timestamp) {
    if (decoder != null) {
      row = decoded(record, range);
      return;
    }
    row = writer.getRow();
    writer.reset();
    writer.zeroOutNullBytes();
    byte[] value = record.value();
    if (value == null) {
      writer.setNullAt(0);
    } else {
      writer.write(0, value);
    }
    writer.write(1, topicNames[range]);
    writer.write(2, ranges.partitions[range]);
    writer.write(3, record.offset());
    writer.write(4, timestamp);
  }

  /** The record as a row of the stream's table (see {@link TableSpec}); the policy applied. */
  private InternalRow decoded(ConsumerRecord<byte[], byte[]> record, int range) {
    byte[] value = record.value();
    GenericInternalRow decoded = value == null ? decoder.failed("record value is null (tombstone)", extra)
        : decoder.decode(value, 0, extra);
    Object[] values = decoded.values();
    Object reason = values[width];
    boolean ok = reason == null;
    if (!ok) {
      String why = reason.toString();
      if (decoder.confluent() && why.startsWith("schema id ")) {
        throw new IllegalStateException("InvalidRecordError: " + where(record, range) + ": " + why + ". If the "
            + "subject has a version registered since the job started, restart the job: it resumes from its "
            + "checkpoint and reads every version the subject has then; nothing is lost");
      }
      if ("fail".equals(table.policy)) {
        throw new IllegalStateException("InvalidRecordError: " + where(record, range) + " cannot be decoded: " + why
            + ". Set SOURCE_KAFKA_INVALID_RECORD_POLICY to 'drop' or 'dead-letter' to keep the job running past "
            + "undecodable records.");
      }
    }
    values[width + 1] = ok;
    if (rowtimeAt >= 0) {
      Object time = ok ? values[rowtimeAt] : null;
      values[width + 2] = time == null ? 0L : time;
    }
    return decoded;
  }

  private String where(ConsumerRecord<byte[], byte[]> record, int range) {
    return "stream '" + table.table + "': record at topic " + ranges.topics[range] + " partition "
        + ranges.partitions[range] + " offset " + record.offset();
  }

  @Override
  public InternalRow get() {
    return row;
  }

  @Override
  public void close() {
    if (failed) {
      pooled.close(); // mid-range (a failed or cancelled task): its positions are not worth keeping
    } else {
      giveBack(key, pooled);
    }
  }
}
