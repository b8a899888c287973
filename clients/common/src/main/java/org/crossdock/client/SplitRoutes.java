package org.crossdock.client;

import java.util.concurrent.ConcurrentHashMap;

/**
 * Where the split partitions of one shuffle go on, as an executor learnt it from the workers'
 * push answers ({@code PushRedirect}). Every map attempt of the shuffle on the executor starts
 * each partition at the latest split known, so a hot partition's later maps land on the worker
 * that took its overflow without a round trip to the coordinator.
 */
public final class SplitRoutes {
  /** The slot a partition's pushes go to and its primary's address. */
  public record Route(int slot, String addr) {}

  private final ConcurrentHashMap<Integer, Route> latest = new ConcurrentHashMap<>();

  /** Where new pushes of {@code partition} go; null: to the partition itself. */
  public Route of(int partition) {
    return latest.get(partition);
  }

  /**
   * Learns that {@code partition} goes on in {@code slot} at {@code addr}. Splits are numbered
   * in the order they are made, so the highest slot heard of is the latest.
   */
  public void learn(int partition, int slot, String addr) {
    latest.merge(partition, new Route(slot, addr),
        (old, now) -> Integer.compareUnsigned(now.slot(), old.slot()) > 0 ? now : old);
  }
}
