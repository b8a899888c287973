package org.crossdock.client.fetch;

import static org.junit.jupiter.api.Assertions.*;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** {@link SmallHeapRead} in a JVM of its own with a 16 MiB heap. */
class SmallHeapReadTest {
  @Test
  void aFrameTooLargeForTheHeapFailsTheTaskWithTheErrorAtOnce() throws Exception {
    Path log = Files.createTempFile("small-heap-read", ".log");
    try {
      String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
      Process p = new ProcessBuilder(java, "-Xmx16m", "-XX:+UseSerialGC", "-Xshare:off",
          "-cp", System.getProperty("java.class.path"), SmallHeapRead.class.getName())
          .redirectErrorStream(true).redirectOutput(log.toFile()).start();
      boolean ended = p.waitFor(60, TimeUnit.SECONDS);
      if (!ended) {
        p.destroyForcibly().waitFor();
      }
      String out = Files.readString(log);
      assertTrue(ended, "the task still waited after 60 s for answers nobody reads:\n" + out);
      assertEquals(0, p.exitValue(), out);
      assertTrue(out.contains("TASK GOT java.lang.OutOfMemoryError"), out);
    } finally {
      new File(log.toString()).delete();
    }
  }
}
