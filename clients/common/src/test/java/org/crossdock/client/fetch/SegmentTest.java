package org.crossdock.client.fetch;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.util.List;
import org.crossdock.protocol.AttemptIds;
import org.crossdock.protocol.Checksums;
import org.crossdock.protocol.Message;
import org.junit.jupiter.api.Test;

/** One run of a map's several, as a segment receives it. */
class SegmentTest {
  static Message.FetchedBatch batch(int map, int seq) {
    byte[] b = ("batch " + seq).getBytes();
    return new Message.FetchedBatch(map, seq, Checksums.crc32c(b, 0, b.length), ByteBuffer.wrap(b));
  }

  @Test
  void aLaterRunStartsAfterTheBatchBeforeItAndEndsBeforeTheNextRun() throws Exception {
    Segment s = Segment.run(2, 7, 0x10002, 100, List.of("w:1"), 1 << 20, 3, 5);
    assertEquals(new Message.ResumePoint(7, 2), s.request("app", 1).resumeAfter(),
        "asked as if resumed after the batch before it");
    assertEquals(java.util.OptionalInt.of(5), s.request("app", 1).endBatchSeq());
    assertEquals(java.util.OptionalInt.of(0x10002), s.request("app", 1).expectedAttempt(),
        "read only from the attempt whose run starts these are");
    // A worker that predates end_batch_seq sends the map's next run too: it is dropped, and the
    // run counts as read although the answer reached the cap.
    s.accept("w:1", List.of(batch(7, 3), batch(7, 4), batch(7, 5), batch(7, 6)));
    s.end("w:1", new Message.FetchEnd(4, 28));
    assertEquals(2, s.ready.size());
    assertEquals(4, s.ready.peekLast().batchSeq());
    assertTrue(s.readToEnd());
    assertEquals(new Message.ResumePoint(7, 4), s.resumePoint());
  }

  @Test
  void aRunKnowsWhenItsMapsOutputWasReplaced() {
    Segment run = Segment.run(0, 2, 0x10000, 10, List.of("w:1"), 64, 1, 0);
    assertNull(run.replacedIn(new int[] {0, 0, 0x10000}), "still the attempt it was planned with");
    assertNull(run.replacedIn(new int[] {0, 0, AttemptIds.NO_ATTEMPT}), "lost, not replaced");
    assertEquals("map 2's output was replaced (attempt 65536 → 131072)",
        run.replacedIn(new int[] {0, 0, 0x20000}));
    Segment any = Segment.run(0, 2, AttemptIds.NO_ATTEMPT, 10, List.of("w:1"), 64, 1, 0);
    assertNull(any.replacedIn(new int[] {0, 0, 0x20000}), "read as whichever is committed");
  }

  @Test
  void theFirstRunAsksFromTheMapsStartAndTheLastToItsEnd() {
    Segment first = Segment.run(0, 1, AttemptIds.NO_ATTEMPT, 10, List.of("w:1"), 64, 0, 2);
    assertNull(first.request("app", 1).resumeAfter());
    Segment last = Segment.run(0, 1, AttemptIds.NO_ATTEMPT, 10, List.of("w:1"), 64, 2, 0);
    assertEquals(java.util.OptionalInt.empty(), last.request("app", 1).endBatchSeq());
    assertEquals(java.util.OptionalInt.empty(), last.request("app", 1).expectedAttempt());
    assertThrows(IllegalArgumentException.class,
        () -> Segment.run(0, 1, AttemptIds.NO_ATTEMPT, 10, List.of("w:1"), 0, 2, 4), "a run is always capped");
    assertThrows(IllegalArgumentException.class,
        () -> Segment.run(0, 1, AttemptIds.NO_ATTEMPT, 10, List.of("w:1"), 64, 4, 2), "it ends after it begins");
  }
}
