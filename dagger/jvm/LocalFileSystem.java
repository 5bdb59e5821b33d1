package dagger.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;

import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (checksummed, as {@code org.apache.hadoop.fs.LocalFileSystem}) whose permissions are set
 * through {@code java.nio} instead of a {@code chmod} process.
 *
 * <p>Without Hadoop's native library, which pyspark does not ship, {@code RawLocalFileSystem} runs {@code chmod} for
 * every file and directory it creates: a checkpoint's offset and commit files and their {@code .crc}, a state store's
 * delta files. Each run is a process the JVM spawns, about 5 ms of a 2-core machine's time per file. Setting the same
 * bits through {@code Files.setPosixFilePermissions} is a system call. A sticky bit, which {@code java.nio} cannot set,
 * still goes to Hadoop's own way.
 */
public class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {
  public LocalFileSystem() {
    super(new Raw());
  }

  /** The raw file system under the checksums. */
  public static class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      if (permission.getStickyBit()) {
        super.setPermission(p, permission);
        return;
      }
      String symbolic = permission.getUserAction().SYMBOL + permission.getGroupAction().SYMBOL
          + permission.getOtherAction().SYMBOL;
      Files.setPosixFilePermissions(pathToFile(p).toPath(), PosixFilePermissions.fromString(symbolic));
    }
  }
}
