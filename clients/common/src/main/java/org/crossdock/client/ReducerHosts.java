package org.crossdock.client;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Where a reduce task should run: the hosts that hold its partitions (SCache's pre-scheduled
 * reducer, paper 003 §3.2). Spark treats every host it is given as equally good and waits up to
 * {@code spark.locality.wait} for a free core on one of them, so the answer names only the hosts
 * worth waiting for.
 *
 * <p>A task that reads one partition (or a slice of one, AQE's skew split) prefers the hosts of
 * the partition's primary and replica: either serves it without a network hop. A task that
 * reads a range of partitions (AQE's coalesced read) prefers the hosts holding the most of the
 * range's partitions, since a range that spans hosts evenly gains nothing from any of them.
 * Partitions are placed in contiguous blocks per worker for that reason (the coordinator's
 * placement), so a coalesced range usually lies on one host.
 */
public final class ReducerHosts {
  private ReducerHosts() {}

  /** The hosts of partition {@code p}'s copies: primary first, then a replica on another host. */
  public static List<String> of(Placement placement, int p) {
    List<String> out = new ArrayList<>(2);
    out.add(placement.hostOf(p));
    String r = placement.replicaHostOf(p);
    if (r != null && !out.contains(r)) {
      out.add(r);
    }
    return out;
  }

  /**
   * The hosts for a task reading partitions {@code [start, end)}: for one partition, {@link
   * #of}; for several, the primaries' hosts holding the largest number of them (all tied hosts).
   * Empty when the range is empty or outside the placement (Spark then runs the task anywhere).
   */
  public static List<String> of(Placement placement, int start, int end) {
    int from = Math.max(start, 0);
    int to = Math.min(end, placement.numPartitions());
    if (from >= to) {
      return List.of();
    }
    if (to - from == 1) {
      return of(placement, from);
    }
    Map<String, Integer> counts = new LinkedHashMap<>();
    int best = 0;
    for (int p = from; p < to; p++) {
      int c = counts.merge(placement.hostOf(p), 1, Integer::sum);
      best = Math.max(best, c);
    }
    List<String> out = new ArrayList<>();
    for (Map.Entry<String, Integer> e : counts.entrySet()) {
      if (e.getValue() == best) {
        out.add(e.getKey());
      }
    }
    return out;
  }

  /**
   * The partitions at which the primaries' host changes: {@code p} is in the answer when
   * partition {@code p - 1} lives on another host. A range {@code [start, end)} that contains
   * none of them lies on one host. The coordinator places a shuffle in one contiguous block per
   * worker, so there are as many as workers less one, whatever the partition count, plus at
   * most two for each partition whose bytes mostly went to another host (a split, or the
   * coordinator's re-placement).
   */
  public static int[] hostBoundaries(Placement placement) {
    int n = placement.numPartitions();
    int[] out = new int[Math.max(n - 1, 0)];
    int k = 0;
    for (int p = 1; p < n; p++) {
      if (!placement.hostOf(p).equals(placement.hostOf(p - 1))) {
        out[k++] = p;
      }
    }
    return java.util.Arrays.copyOf(out, k);
  }

  /**
   * {@code [start, end)} cut at every one of {@code sortedCuts} strictly inside it: the pieces,
   * in order, as {@code {start, end}} pairs. The same cuts applied to equal ranges give equal
   * pieces, which is what keeps the two sides of a join aligned.
   */
  public static List<int[]> split(int start, int end, int[] sortedCuts) {
    List<int[]> out = new ArrayList<>(2);
    int from = start;
    for (int c : sortedCuts) {
      if (c > from && c < end) {
        out.add(new int[] {from, c});
        from = c;
      }
    }
    out.add(new int[] {from, end});
    return out;
  }
}
