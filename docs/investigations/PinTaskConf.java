// Pins a Spark task's SQL conf to its thread for the task's length (docs/investigations/spark_nested_rows.py): a
// task's SQLConf.get otherwise builds a new ReadOnlySQLConf at each call, as Spark 4.2 does per field of each
// nested row it makes. An experiment, not part of the product.
package dagger.spark;

import java.lang.reflect.Field;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.internal.ReadOnlySQLConf;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.internal.SQLConf$;

public class PinTaskConf implements UDF1<Object, Boolean> {
  private static final ThreadLocal<Long> PINNED = new ThreadLocal<>();
  private static final ThreadLocal<SQLConf> EXISTING = existing();

  @SuppressWarnings("unchecked")
  private static ThreadLocal<SQLConf> existing() {
    try {
      Field f = SQLConf$.class.getDeclaredField("existingConf");
      f.setAccessible(true);
      return (ThreadLocal<SQLConf>) f.get(SQLConf$.MODULE$);
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null;
    }
  }

  @Override
  public Boolean call(Object ignored) {
    TaskContext task = TaskContext.get();
    if (task == null || EXISTING == null) return true;
    Long id = PINNED.get();
    if (id != null && id == task.taskAttemptId()) return true;
    if (EXISTING.get() != null) return true;
    EXISTING.set(new ReadOnlySQLConf(task));
    PINNED.set(task.taskAttemptId());
    task.addTaskCompletionListener(ctx -> { EXISTING.remove(); PINNED.remove(); });
    return true;
  }
}
