package org.crossdock.client.fetch;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.crossdock.protocol.AttemptIds;
import org.crossdock.protocol.Message;

/**
 * Where maps that pushed a partition as several sorted runs began the later ones (the
 * coordinator's {@code run_starts}), as a merging reader plans its segments: one capped segment
 * per (slot, map), or one per run of a map that pushed several. Both engines' merged reads plan
 * with it.
 */
public final class RunStartIndex {
  /** Later runs' first batches per (slot, map), in batch order. */
  private final Map<Long, List<Integer>> later = new HashMap<>();
  /** The committed attempt of each map, from the same answer as the run starts (or null). */
  private final int[] attempts;
  private long count;

  /**
   * The run starts of maps {@code [startMap, endMap)} among {@code starts} (null: none), with
   * {@code attempts}, each map's committed attempt in the same answer of the coordinator's
   * (indexed by map; null: not known): a run is read only from the attempt its starts are of.
   */
  public RunStartIndex(List<Message.MapRunStart> starts, int[] attempts, int startMap,
      int endMap) {
    this.attempts = attempts;
    if (starts == null) {
      return;
    }
    for (Message.MapRunStart r : starts) {
      if (r.mapId() >= startMap && r.mapId() < endMap) {
        later.computeIfAbsent(key(r.partition(), r.mapId()), k -> new ArrayList<>())
            .add(r.batchSeq());
        count++;
      }
    }
  }

  private static long key(int slot, int map) {
    return ((long) slot << 32) | (map & 0xffffffffL);
  }

  /** Runs beyond the first of each map: what they add to the runs a reader merges. */
  public long count() {
    return count;
  }

  /**
   * Adds the segments of map {@code map}'s output in {@code slot} to {@code out}: one, or one
   * per run, each asking {@code cap} bytes at a time and sharing {@code estimate}.
   */
  public void addSegments(List<Segment> out, int slot, int map, long estimate,
      List<String> copies, long cap) {
    List<Integer> starts = later.get(key(slot, map));
    if (starts == null) {
      out.add(new Segment(slot, map, map + 1, estimate, copies, cap));
      return;
    }
    int attempt = attempts != null && map < attempts.length ? attempts[map]
        : AttemptIds.NO_ATTEMPT;
    int first = 0;
    for (int i = 0; i <= starts.size(); i++) {
      int end = i < starts.size() ? starts.get(i) : 0;
      out.add(Segment.run(slot, map, attempt, estimate / (starts.size() + 1), copies, cap, first,
          end));
      first = end;
    }
  }
}
