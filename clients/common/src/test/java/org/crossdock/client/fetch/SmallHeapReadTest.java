package org.crossdock.client.fetch;

import static org.junit.jupiter.api.Assertions.*;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** {@link SmallHeapRead} in a JVM of its own with a 16 MiB heap. */
class SmallHeapReadTest {
  /** Runs {@link SmallHeapRead} {@code mode}; returns its output once it exited 0. */
  static String run(String mode) throws Exception {
    Path log = Files.createTempFile("small-heap-read", ".log");
    try {
      String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
      Process p = new ProcessBuilder(java, "-Xmx16m", "-XX:+UseSerialGC", "-Xshare:off",
          "-cp", System.getProperty("java.class.path"), SmallHeapRead.class.getName(), mode)
          .redirectErrorStream(true).redirectOutput(log.toFile()).start();
      // The answers nobody reads would be waited for 60 s (the read timeout, the call's wait).
      boolean ended = p.waitFor(45, TimeUnit.SECONDS);
      if (!ended) {
        p.destroyForcibly().waitFor();
      }
      String out = Files.readString(log);
      assertTrue(ended, "still waiting after 45 s for answers nobody reads:\n" + out);
      assertEquals(0, p.exitValue(), out);
      return out;
    } finally {
      new File(log.toString()).delete();
    }
  }

  @Test
  void aFrameTooLargeForTheHeapFailsTheTaskWithTheErrorAtOnce() throws Exception {
    String out = run("fetch");
    assertTrue(out.contains("TASK GOT java.lang.OutOfMemoryError"), out);
  }

  @Test
  void onASharedConnectionItFailsTheCallsAsABrokenConnection() throws Exception {
    String out = run("rpc");
    assertTrue(out.contains("CALL FAILED org.crossdock.client.CrossdockException: connection lost"
        + " before the response arrived"), out);
    assertTrue(out.contains("OutOfMemoryError"), "the error is named:\n" + out);
  }
}
