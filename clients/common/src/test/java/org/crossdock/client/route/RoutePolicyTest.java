package org.crossdock.client.route;

import static org.junit.jupiter.api.Assertions.*;

import org.crossdock.client.route.RoutePolicy.Decision;
import org.crossdock.client.route.RoutePolicy.Mode;
import org.crossdock.client.route.RoutePolicy.Shuffle;
import org.junit.jupiter.api.Test;

class RoutePolicyTest {
  static final long MIB = 1L << 20;
  static final RoutePolicy AUTO = new RoutePolicy(Mode.AUTO, 64 * MIB, null);

  static Shuffle shuffle(int maps, int partitions, long bytes) {
    return new Shuffle(maps, partitions, bytes, "2 files and 0 earlier shuffles");
  }

  @Test
  void aSmallShuffleGoesThroughTheEngineUpToTheThresholdInclusive() {
    assertFalse(AUTO.decide(shuffle(8, 24, 0)).crossdock());
    assertFalse(AUTO.decide(shuffle(8, 24, 64 * MIB)).crossdock());
    Decision d = AUTO.decide(shuffle(8, 24, 64 * MIB + 1));
    assertTrue(d.crossdock());
    assertTrue(d.reason().contains("more than 64 MiB"), d.reason());
  }

  @Test
  void aShuffleOfUnknownSizeGoesThroughCrossdockAndSaysWhy() {
    Decision d = AUTO.decide(new Shuffle(8, 24, -1, "it reads ParallelCollectionRDD"));
    assertTrue(d.crossdock());
    assertTrue(d.reason().contains("ParallelCollectionRDD"), d.reason());
  }

  @Test
  void aSmallShuffleOfManyBlocksStaysWithCrossdock() {
    assertFalse(AUTO.decide(shuffle(499, 500, MIB)).crossdock());
    Decision d = AUTO.decide(shuffle(500, 500, MIB));
    assertTrue(d.crossdock());
    assertTrue(d.reason().contains("250000 blocks"), d.reason());
  }

  @Test
  void aShuffleIntoOnePartitionGoesThroughTheEngineUpToSixteenTimesTheThreshold() {
    Decision d = AUTO.decide(shuffle(24, 1, 232 * MIB));
    assertFalse(d.crossdock());
    assertTrue(d.reason().contains("one reduce partition: 24 blocks"), d.reason());
    assertFalse(AUTO.decide(shuffle(24, 1, 1024 * MIB)).crossdock());
    // Past the bound (a repartition(1) of a large input), Crossdock keeps it.
    Decision big = AUTO.decide(shuffle(24, 1, 1024 * MIB + 1));
    assertTrue(big.crossdock());
    assertTrue(big.reason().contains("one reduce partition, but an estimated 1073741825 bytes"),
        big.reason());
    assertTrue(big.reason().contains("more than 1073741824 (16 x 64 MiB)"), big.reason());
    // Its size unknown, it stays with Crossdock as any other; two partitions are sized.
    assertTrue(AUTO.decide(new Shuffle(24, 1, -1, "it reads ParallelCollectionRDD")).crossdock());
    assertTrue(AUTO.decide(shuffle(24, 2, 232 * MIB)).crossdock());
    // A great many maps into one partition: their blocks are read grouped.
    assertTrue(AUTO.decide(shuffle(250_000, 1, MIB)).crossdock());
    // Forced either way, the partition count does not matter.
    assertTrue(new RoutePolicy(Mode.CROSSDOCK, 64 * MIB, null).decide(shuffle(24, 1, 0)).crossdock());
    // No overflow with a huge threshold.
    assertFalse(new RoutePolicy(Mode.AUTO, Long.MAX_VALUE / 2, null)
        .decide(shuffle(24, 1, Long.MAX_VALUE)).crossdock());
  }

  @Test
  void aForcedRouteIgnoresTheSize() {
    RoutePolicy crossdock = new RoutePolicy(Mode.CROSSDOCK, 64 * MIB, null);
    RoutePolicy engine = new RoutePolicy(Mode.ENGINE, 64 * MIB, null);
    assertTrue(crossdock.decide(shuffle(1, 1, 10)).crossdock());
    assertFalse(engine.decide(shuffle(1000, 1000, 1L << 40)).crossdock());
    assertFalse(engine.decide(new Shuffle(2, 2, -1, "unknown")).crossdock());
  }

  @Test
  void whenTheEngineCannotKeepItsFilesEveryShuffleGoesThroughCrossdock() {
    String why = "dynamic allocation is on without an external shuffle service";
    RoutePolicy auto = new RoutePolicy(Mode.AUTO, 64 * MIB, why);
    RoutePolicy engine = new RoutePolicy(Mode.ENGINE, 64 * MIB, why);
    Decision a = auto.decide(shuffle(2, 2, 10));
    Decision e = engine.decide(shuffle(2, 2, 10));
    assertTrue(a.crossdock());
    assertTrue(e.crossdock());
    assertEquals(why, a.reason());
    assertTrue(e.reason().startsWith("the route is forced to spark, but"), e.reason());
  }

  @Test
  void theSettingIsParsedStrictly() {
    assertEquals(Mode.AUTO, Mode.parse("k", "auto"));
    assertEquals(Mode.CROSSDOCK, Mode.parse("k", " Crossdock "));
    assertEquals(Mode.ENGINE, Mode.parse("k", "spark"));
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> Mode.parse("spark.crossdock.route", "sort"));
    assertTrue(e.getMessage().contains("spark.crossdock.route must be auto, crossdock or spark"));
    assertThrows(IllegalArgumentException.class, () -> new RoutePolicy(Mode.AUTO, -1, null));
  }

  @Test
  void sizesReadAtAGlance() {
    assertEquals("10239 B", RoutePolicy.bytes(10239));
    assertEquals("10 KiB", RoutePolicy.bytes(10240));
    assertEquals("64 MiB", RoutePolicy.bytes(64 * MIB));
    assertEquals("12 GiB", RoutePolicy.bytes(12L << 30));
  }
}
