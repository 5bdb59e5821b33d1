package dagger.longbow;

import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.streaming.ListState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.LongAccumulator;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Classic Longbow's history in Spark's state store, in the JVM (dagger/longbow/state.py calls {@link #apply}).
 *
 * <p>Runs on the executors, once per key per micro-batch. A key's history is a list state of entries
 * {@code (ms, values)}: a row's rowtime in epoch milliseconds and its {@code longbow_data*} values. A micro-batch
 * appends its rows' entries; entries older than the document duration before the key's newest rowtime are never
 * read, and the list is rewritten without them (and without entries a later row with the same rowtime replaced)
 * once they outnumber the live ones. Each row's {@code longbow_data*} columns become the values over its range,
 * most recent first, both ends inclusive.
 */
public final class StateHistory extends StatefulProcessor<String, Row, Row> {
  private static final long serialVersionUID = 1L;
  private static final Pattern DURATION = Pattern.compile("^(\\d+)([mhd])$");
  /** The counters, in the order {@link #apply} takes them. */
  public static final String[] COUNTERS = {
    "success_on_write_document", "success_on_read_document", "documents_read_per_scan", "rows_without_key"
  };

  private final int key;
  private final int rowtime;
  private final int[] data;
  private final int duration;
  private final int earliest;
  private final int latest;
  private final long keepMs;
  private final LongAccumulator[] counters;
  private final StructType entrySchema;
  private transient ListState<Row> history;

  private StateHistory(StructType input, String key, String rowtime, String[] data, String duration,
      String earliest, String latest, long keepMs, LongAccumulator[] counters) {
    this.key = input.fieldIndex(key);
    this.rowtime = input.fieldIndex(rowtime);
    this.data = Arrays.stream(data).mapToInt(input::fieldIndex).toArray();
    this.duration = duration == null ? -1 : input.fieldIndex(duration);
    this.earliest = earliest == null ? -1 : input.fieldIndex(earliest);
    this.latest = latest == null ? -1 : input.fieldIndex(latest);
    this.keepMs = keepMs;
    this.counters = counters;
    this.entrySchema = entrySchema();
  }

  /** The list's element: a rowtime in epoch milliseconds and one value per longbow_data* column. */
  public static StructType entrySchema() {
    return new StructType(new StructField[] {
      DataTypes.createStructField("ms", DataTypes.LongType, false),
      DataTypes.createStructField("values", DataTypes.createArrayType(DataTypes.StringType, true), false)
    });
  }

  /**
   * {@code df} with its {@code data} columns replaced by their histories (ARRAY&lt;STRING&gt;); runs on the driver.
   * {@code duration} names the column of a row's range back from its rowtime, or is null when {@code earliest}
   * and {@code latest} bound it. {@code counters} are {@link #COUNTERS}' accumulators.
   */
  public static Dataset<Row> apply(Dataset<Row> df, String key, String rowtime, String[] data, String duration,
      String earliest, String latest, long keepMs, LongAccumulator[] counters) {
    StructType input = df.schema();
    StructType out = new StructType();
    List<String> replaced = Arrays.asList(data);
    for (StructField f : input.fields()) {
      out = replaced.contains(f.name())
          ? out.add(f.name(), DataTypes.createArrayType(DataTypes.StringType, true), true)
          : out.add(f);
    }
    int grouping = input.fieldIndex(key);
    StateHistory processor =
        new StateHistory(input, key, rowtime, data, duration, earliest, latest, keepMs, counters);
    MapFunction<Row, String> byKey = row -> row.getString(grouping);
    return df.groupByKey(byKey, Encoders.STRING())
        .transformWithState(processor, TimeMode.ProcessingTime(), OutputMode.Append(), Encoders.row(out));
  }

  /** Counters made on the driver, one per {@link #COUNTERS} name. */
  public static LongAccumulator[] counters(SparkSession spark) {
    LongAccumulator[] made = new LongAccumulator[COUNTERS.length];
    for (int i = 0; i < made.length; i++) {
      made[i] = spark.sparkContext().longAccumulator("longbow_" + COUNTERS[i]);
    }
    return made;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    Encoder<Row> entries = Encoders.row(entrySchema);
    history = getHandle().getListState("history", entries, TTLConfig.apply(java.time.Duration.ofMillis(keepMs)));
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(String groupKey, scala.collection.Iterator<Row> rows,
      TimerValues timerValues) {
    List<Row> batch = new ArrayList<>();
    rows.foreach(batch::add);
    List<Row> fresh = new ArrayList<>();
    long written = 0;
    long withoutKey = 0;
    for (Row row : batch) {
      Long ms = millis(row.get(rowtime));
      if (ms == null || row.isNullAt(key)) {
        withoutKey++;
        continue;
      }
      String[] values = new String[data.length];
      for (int i = 0; i < data.length; i++) {
        values[i] = row.isNullAt(data[i]) ? null : row.getString(data[i]);
      }
      fresh.add(RowFactory.create(ms, CollectionConverters.asScala(Arrays.asList(values)).toSeq()));
      written++;
    }
    long newest = Long.MIN_VALUE;
    List<Row> stored = new ArrayList<>();
    Iterator<Row> got = CollectionConverters.asJava(history.get());
    while (got.hasNext()) {
      Row entry = got.next();
      stored.add(entry);
      newest = Math.max(newest, entry.getLong(0));
    }
    for (Row entry : fresh) {
      newest = Math.max(newest, entry.getLong(0));
    }
    long floor = newest - keepMs;
    TreeMap<Long, Row> live = new TreeMap<>();  // a later entry replaces one with its rowtime
    for (Row entry : stored) {
      if (entry.getLong(0) >= floor) {
        live.put(entry.getLong(0), entry);
      }
    }
    List<Row> added = new ArrayList<>();
    for (Row entry : fresh) {
      if (entry.getLong(0) >= floor) {
        live.put(entry.getLong(0), entry);
        added.add(entry);
      }
    }
    if (stored.size() + fresh.size() - live.size() > live.size()) {
      history.put(live.values().toArray(new Row[0]));
    } else if (!added.isEmpty()) {
      history.appendList(added.toArray(new Row[0]));
    }
    long reads = 0;
    long documents = 0;
    List<Row> out = new ArrayList<>(batch.size());
    for (Row row : batch) {
      long[] span = range(row);
      Object[] values = new Object[row.length()];
      List<List<String>> columns = new ArrayList<>();
      for (int i = 0; i < data.length; i++) {
        columns.add(new ArrayList<>());
      }
      if (span != null) {
        reads++;
        for (Map.Entry<Long, Row> hit : live.subMap(span[0], true, span[1], true).descendingMap().entrySet()) {
          documents++;
          List<String> hitValues = CollectionConverters.asJava(hit.getValue().<String>getSeq(1));
          for (int i = 0; i < data.length; i++) {
            columns.get(i).add(hitValues.get(i));
          }
        }
      }
      for (int i = 0; i < row.length(); i++) {
        int column = indexOf(data, i);
        values[i] = column < 0 ? row.get(i) : CollectionConverters.asScala(columns.get(column)).toSeq();
      }
      out.add(RowFactory.create(values));
    }
    counters[0].add(written);
    counters[1].add(reads);
    counters[2].add(documents);
    counters[3].add(withoutKey);
    return CollectionConverters.asScala(out.iterator());
  }

  private static int indexOf(int[] columns, int column) {
    for (int i = 0; i < columns.length; i++) {
      if (columns[i] == column) {
        return i;
      }
    }
    return -1;
  }

  /** The row's inclusive range of rowtimes (epoch ms), or null when it reads nothing. */
  private long[] range(Row row) {
    if (row.isNullAt(key)) {
      return null;
    }
    if (duration >= 0) {
      Long ms = millis(row.get(rowtime));
      if (ms == null || row.isNullAt(duration)) {
        return null;
      }
      return new long[] {ms - durationMs(row.getString(duration), row.getString(key)), ms};
    }
    if (earliest < 0 || latest < 0) {
      return null;
    }
    Long from = millis(row.get(earliest));
    Long to = millis(row.get(latest));
    if (from == null || to == null || from > to) {
      return null;
    }
    return new long[] {from, to};
  }

  private static long durationMs(String text, String key) {
    Matcher found = DURATION.matcher(text.strip());
    if (!found.matches()) {
      throw new IllegalArgumentException("longbow_duration of a row (key '" + key + "'): '" + text
          + "' is not a duration; Longbow durations are a whole number of minutes, hours or days (e.g. 30m, 12h, 90d)");
    }
    long unit = switch (found.group(2)) {
      case "m" -> 60_000L;
      case "h" -> 3_600_000L;
      default -> 86_400_000L;
    };
    return Long.parseLong(found.group(1)) * unit;
  }

  /** A rowtime or range bound (TIMESTAMP, TIMESTAMP_NTZ or epoch-millisecond BIGINT) in epoch milliseconds. */
  private static Long millis(Object value) {
    if (value == null) {
      return null;
    }
    if (value instanceof Timestamp t) {
      return t.getTime();
    }
    if (value instanceof Instant t) {
      return t.toEpochMilli();
    }
    if (value instanceof LocalDateTime t) {
      return t.toInstant(ZoneOffset.UTC).toEpochMilli();
    }
    return ((Number) value).longValue();
  }
}
