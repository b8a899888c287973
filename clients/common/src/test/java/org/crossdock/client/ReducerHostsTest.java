package org.crossdock.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

class ReducerHostsTest {
  /** Six partitions in blocks on three hosts; replicas on the next host. */
  private static final Placement PLACEMENT = new Placement(
      new String[] {"10.0.0.1:7001", "10.0.0.2:7001", "10.0.0.3:7001"},
      new int[] {0, 0, 1, 1, 2, 2},
      new int[] {1, 1, 2, 2, 0, -1});

  @Test
  void onePartitionPrefersItsPrimaryThenItsReplica() {
    assertEquals(List.of("10.0.0.1", "10.0.0.2"), ReducerHosts.of(PLACEMENT, 0));
    assertEquals(List.of("10.0.0.3", "10.0.0.1"), ReducerHosts.of(PLACEMENT, 4, 5));
    assertEquals(List.of("10.0.0.3"), ReducerHosts.of(PLACEMENT, 5, 6));
  }

  @Test
  void aReplicaOnTheSameHostIsNamedOnce() {
    Placement p = new Placement(new String[] {"h:1", "h:2"}, new int[] {0}, new int[] {1});
    assertEquals(List.of("h"), ReducerHosts.of(p, 0));
  }

  @Test
  void aRangePrefersTheHostsHoldingMostOfIt() {
    assertEquals(List.of("10.0.0.1"), ReducerHosts.of(PLACEMENT, 0, 2));
    assertEquals(List.of("10.0.0.2"), ReducerHosts.of(PLACEMENT, 1, 4));
    // Two partitions on each host: every host is as good.
    assertEquals(List.of("10.0.0.1", "10.0.0.2", "10.0.0.3"), ReducerHosts.of(PLACEMENT, 0, 6));
  }

  @Test
  void anEmptyOrOutsideRangeHasNoPreference() {
    assertEquals(List.of(), ReducerHosts.of(PLACEMENT, 3, 3));
    assertEquals(List.of(), ReducerHosts.of(PLACEMENT, 6, 9));
    assertEquals(List.of("10.0.0.3"), ReducerHosts.of(PLACEMENT, 5, 100));
  }

  @Test
  void hostsAreAddressesWithoutTheirPort() {
    Placement p = new Placement(new String[] {"[::1]:7001"}, new int[] {0}, new int[] {-1});
    assertEquals("::1", p.hostOf(0));
  }

  @Test
  void hostLabelsFromTheCoordinatorNameTheHosts() {
    List<org.crossdock.protocol.Message.WorkerInfo> workers = List.of(
        new org.crossdock.protocol.Message.WorkerInfo(7, "10.0.0.1:7001", true, "node-1", "a"),
        new org.crossdock.protocol.Message.WorkerInfo(9, "10.0.0.2:7001", true, "", ""));
    Placement p = Placement.of(workers, new int[] {7, 9}, new int[] {9, 7});
    assertEquals("node-1", p.hostOf(0));
    assertEquals("10.0.0.2", p.replicaHostOf(0));
    assertEquals("10.0.0.2", p.hostOf(1));
    assertEquals(List.of("10.0.0.2", "node-1"), ReducerHosts.of(p, 1));
  }

  @Test
  void aPartitionContinuedElsewhereIsReducedWhereMostOfItsBytesAre() {
    List<org.crossdock.protocol.Message.WorkerInfo> workers = List.of(
        new org.crossdock.protocol.Message.WorkerInfo(0, "10.0.0.1:7001", true, "h0", ""),
        new org.crossdock.protocol.Message.WorkerInfo(1, "10.0.0.2:7001", true, "h1", ""));
    // Partitions 0 and 1 on h0; partition 0 continued on h1 (slot 2) with most of its bytes,
    // partition 1 continued on h1 (slot 3) with fewer than it kept.
    org.crossdock.protocol.Message.ShuffleStatus s = new org.crossdock.protocol.Message.ShuffleStatus(
        4, 2, 4, workers, new int[] {0, 0, 1, 1}, new int[] {0, 0, 0, 0},
        new long[] {100, 300, 900, 200}, new long[] {1, 1, 1, 1},
        new int[] {-1, -1, -1, -1}, new int[] {0, 1}, java.util.OptionalLong.empty(), null);
    Placement p = Placement.of(s);
    assertEquals("h1", p.hostOf(0));
    assertEquals("h0", p.hostOf(1));
    // Two slots on h1 with 300 each outweigh 400 on h0: the sum per host counts.
    org.crossdock.protocol.Message.ShuffleStatus two =
        new org.crossdock.protocol.Message.ShuffleStatus(4, 1, 4, workers, new int[] {0, 1, 1},
            new int[] {0, 0, 0, 0}, new long[] {400, 300, 300}, new long[] {1, 1, 1},
            new int[] {-1, -1, -1}, new int[] {0, 0}, java.util.OptionalLong.empty(), null);
    assertEquals("h1", Placement.of(two).hostOf(0));
    assertEquals(List.of("h1"), ReducerHosts.of(p, 0, 1));
    assertArrayEquals(new int[] {1}, ReducerHosts.hostBoundaries(p));
    // Pushes and reads still go by slot.
    assertEquals("10.0.0.1:7001", p.addrOf(0));
    assertArrayEquals(new int[] {0, 2}, p.slotsOf(0));
    // Without a status's bytes, a partition is reduced where its own slot is.
    Placement handle = Placement.of(workers, new int[] {0, 0}, new int[] {-1, -1});
    assertEquals("h0", handle.hostOf(0));
  }

  @Test
  void hostBoundariesAreWhereTheHostChanges() {
    assertArrayEquals(new int[] {2, 4}, ReducerHosts.hostBoundaries(PLACEMENT));
    // Two workers on one host are one host: no boundary between their blocks.
    Placement sameHost = new Placement(
        new String[] {"h:1", "h:2", "g:1"}, new int[] {0, 0, 1, 1, 2},
        new int[] {-1, -1, -1, -1, -1});
    assertArrayEquals(new int[] {4}, ReducerHosts.hostBoundaries(sameHost));
    Placement one = new Placement(new String[] {"h:1"}, new int[] {0}, new int[] {-1});
    assertArrayEquals(new int[0], ReducerHosts.hostBoundaries(one));
  }

  @Test
  void aRangeIsSplitOnlyAtCutsInsideIt() {
    int[] cuts = {2, 4};
    assertEquals(List.of("0-2", "2-4", "4-6"), pieces(ReducerHosts.split(0, 6, cuts)));
    assertEquals(List.of("1-2", "2-3"), pieces(ReducerHosts.split(1, 3, cuts)));
    // A cut at either end is no cut.
    assertEquals(List.of("2-4"), pieces(ReducerHosts.split(2, 4, cuts)));
    assertEquals(List.of("4-5"), pieces(ReducerHosts.split(4, 5, cuts)));
    assertEquals(List.of("0-6"), pieces(ReducerHosts.split(0, 6, new int[0])));
  }

  private static List<String> pieces(List<int[]> ranges) {
    return ranges.stream().map(r -> r[0] + "-" + r[1]).toList();
  }
}
