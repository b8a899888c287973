package org.apache.spark.shuffle.crossdock;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.io.InterruptedIOException;
import org.apache.spark.shuffle.FetchFailedException;
import org.crossdock.client.CrossdockException;
import org.junit.jupiter.api.Test;

/** What a failure of a reader's records becomes for Spark ({@link CrossdockShuffleReader#readFailure}). */
class ReadFailureTest {
  static final FetchFailedException FETCH_FAILED =
      new FetchFailedException(null, 1, 0L, 0, 0, "undecodable", null);

  static Throwable thrown(Throwable t) {
    return assertThrows(Throwable.class, () -> {
      throw CrossdockShuffleReader.readFailure(t, io -> FETCH_FAILED);
    });
  }

  @Test
  void undecodableBytesAreAFetchFailure() {
    assertSame(FETCH_FAILED, thrown(new RuntimeException(new IOException("bad block"))));
    assertSame(FETCH_FAILED, thrown(CrossdockException.corrupt("w:1", "bad CRC")));
  }

  @Test
  void theClientsOwnFailureIsTheTasksNotLostData() {
    CrossdockException local =
        CrossdockException.local("w:1", "the fetch connection's thread failed", new IllegalStateException("x"));
    assertSame(local, thrown(local), "rethrown as it is: Spark retries the task, no map is recomputed");
    RuntimeException wrapped = new RuntimeException(local);
    assertSame(wrapped, thrown(wrapped));
    IOException deeper = new IOException("reading the next batch", local);
    assertSame(deeper, thrown(deeper), "also under an I/O error of its own");
  }

  @Test
  void fetchFailuresInterruptsAndOtherErrorsPassAsTheyAre() {
    FetchFailedException ff = new FetchFailedException(null, 2, 0L, 0, 0, "lost", null);
    assertSame(ff, thrown(ff));
    InterruptedIOException interrupted = new InterruptedIOException("killed");
    assertSame(interrupted, thrown(interrupted));
    OutOfMemoryError oom = new OutOfMemoryError("test");
    assertSame(oom, thrown(oom));
  }
}
