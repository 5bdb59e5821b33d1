package dagger.kafka;

/**
 * The driver-side half of Dagger's Kafka source in the JVM ({@link KafkaRangesSource}): where a stream starts, what
 * each micro-batch reads (admission, event-time alignment, new topics and partitions), the group commits. It is
 * Dagger's own Kafka reader's planning (dagger/kafka/source/reader.py, in Python on the driver), handed to the JVM
 * through py4j's callback server: the records never meet Python, the planning stays one implementation.
 *
 * <p>Offsets are the Python reader's JSON ({@code {"@table": table, "topic:partition": next offset}}), so a
 * checkpoint's offsets read the same whichever reader wrote them. Every method runs on the driver, on the query's
 * thread.
 */
public interface RangePlanner {
  /** Where the stream starts (a first run). */
  String initialOffset();

  /** The read limit: at most this many records a micro-batch, or a negative number for all available. */
  long defaultMaxRows();

  /** The next micro-batch's end offsets, from {@code start}, under {@code maxRows} (negative: no limit). */
  String latestOffset(String start, long maxRows);

  /** The latest offsets the last planning saw (consumer lag in the progress), or null. */
  String reportLatestOffset();

  /**
   * The ranges each task reads between two offsets, as JSON: a list of tasks, each a list of
   * {@code [topic, partition, from, until]}.
   */
  String partitions(String start, String end);

  /** A micro-batch up to {@code end} is done: its offsets go to the consumer group. */
  void commit(String end);

  /** {@code --available-now}: pin the end offsets. */
  void prepareForTriggerAvailableNow();

  void stop();
}
