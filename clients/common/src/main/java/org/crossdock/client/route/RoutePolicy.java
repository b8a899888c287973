package org.crossdock.client.route;

/**
 * Which shuffle service carries one shuffle: Crossdock, or the engine's own shuffle.
 *
 * <p>A remote shuffle pays fixed costs per shuffle, per map and per reduce task (registration,
 * a commit per map, a first fetch per partition) that only a shuffle of some size wins back;
 * the engine's own shuffle writes a small shuffle to the page cache of the executor's host and
 * reads it back almost for free. Celeborn falls back to Spark's shuffle for such shuffles;
 * Crossdock does too, but only when the shuffle is known to be small: a shuffle whose size
 * cannot be estimated goes through Crossdock, which never does worse than a remote service
 * can. A small shuffle split into a great many blocks (maps × partitions) also stays with
 * Crossdock: the engine would fetch every tiny block on its own, while Crossdock's workers
 * have already grouped them into one stream per partition.
 *
 * <p>A shuffle into <em>one</em> partition goes through the engine up to a larger bound,
 * {@link #ONE_PARTITION_FACTOR} times the threshold: it has only one block per map, which the
 * single reduce task fetches in as many requests, so grouping them saves little, while the
 * remote path adds the push, the commits and the first fetch. In SQL these are mostly global
 * aggregations, whose input estimate (the scanned files) says nothing of their output (one row
 * per map). Past the bound (a {@code repartition(1)} or a window without partitioning of a
 * large input) Crossdock keeps it, for the same reasons as any large shuffle: the data off the
 * executors' disks, replicated, and a lost executor's maps not run again.
 *
 * <p>Pure: the engine client gathers what it knows when the shuffle is registered (the counts,
 * and an estimate of the bytes from the inputs of the map stage) and calls {@link #decide};
 * the decision and its reason are then logged and counted by the caller.
 */
public final class RoutePolicy {
  /** What the user asked for ({@code spark.crossdock.route}). */
  public enum Mode {
    /** Shuffles known to be small through the engine's shuffle, the rest through Crossdock. */
    AUTO,
    /** Every shuffle through Crossdock. */
    CROSSDOCK,
    /** Every shuffle through the engine's own shuffle (Crossdock only holds the app). */
    ENGINE;

    /** The mode named {@code s} as the setting spells it: auto, crossdock or spark. */
    public static Mode parse(String key, String s) {
      return switch (s.trim().toLowerCase(java.util.Locale.ROOT)) {
        case "auto" -> AUTO;
        case "crossdock" -> CROSSDOCK;
        case "spark" -> ENGINE;
        default -> throw new IllegalArgumentException(
            key + " must be auto, crossdock or spark, got '" + s + "'");
      };
    }
  }

  /**
   * What is known of a shuffle when it is registered.
   *
   * @param maps map tasks
   * @param partitions reduce partitions
   * @param estimatedBytes the bytes the map stage reads, an upper bound of what it usually
   *     writes; negative when unknown (an input of unknown size, such as a generated range or a
   *     parent shuffle that has not run yet)
   * @param estimateSource what the estimate was made from, for the log line
   */
  public record Shuffle(int maps, int partitions, long estimatedBytes, String estimateSource) {
    public boolean sizeKnown() {
      return estimatedBytes >= 0;
    }

    /** Blocks the engine's own shuffle would write and fetch one by one. */
    public long blocks() {
      return (long) maps * partitions;
    }
  }

  /** The route and why, in a sentence fit for a log line. */
  public record Decision(boolean crossdock, String reason) {}

  /**
   * Blocks above which a small shuffle still goes through Crossdock: at 250,000 blocks (500
   * maps × 500 partitions) the engine's reducers fetch blocks of a few hundred bytes each, one
   * request per map and partition range, where Crossdock reads one grouped stream per partition.
   */
  public static final long MANY_BLOCKS = 250_000;

  /**
   * How many times the threshold a shuffle into one partition may be estimated at and still go
   * through the engine (64 MiB × 16 = 1 GiB by default): its input estimate is mostly far above
   * what it writes.
   */
  public static final long ONE_PARTITION_FACTOR = 16;

  private final Mode mode;
  private final long maxEngineBytes;
  private final String engineUnavailable;

  /**
   * @param mode what the user asked for
   * @param maxEngineBytes the largest estimated shuffle that {@code AUTO} sends to the engine
   * @param engineUnavailable why the engine's shuffle cannot be used safely in this
   *     application (for instance dynamic allocation without a way to keep the executors that
   *     hold shuffle files), or null when it can
   */
  public RoutePolicy(Mode mode, long maxEngineBytes, String engineUnavailable) {
    if (maxEngineBytes < 0) {
      throw new IllegalArgumentException("maxEngineBytes must not be negative: " + maxEngineBytes);
    }
    this.mode = mode;
    this.maxEngineBytes = maxEngineBytes;
    this.engineUnavailable = engineUnavailable;
  }

  public Mode mode() {
    return mode;
  }

  public long maxEngineBytes() {
    return maxEngineBytes;
  }

  /** The route of one shuffle. */
  public Decision decide(Shuffle s) {
    switch (mode) {
      case CROSSDOCK:
        return new Decision(true, "the route is forced to crossdock");
      case ENGINE:
        if (engineUnavailable != null) {
          return new Decision(true, "the route is forced to spark, but " + engineUnavailable);
        }
        return new Decision(false, "the route is forced to spark");
      default:
        break;
    }
    if (engineUnavailable != null) {
      return new Decision(true, engineUnavailable);
    }
    if (!s.sizeKnown()) {
      return new Decision(true, "its size cannot be estimated (" + s.estimateSource() + ")");
    }
    if (s.blocks() >= MANY_BLOCKS) {
      return new Decision(true, "it has " + s.blocks() + " blocks (" + s.maps() + " maps x "
          + s.partitions() + " partitions), which Crossdock reads grouped");
    }
    long onePartitionBound = maxEngineBytes > Long.MAX_VALUE / ONE_PARTITION_FACTOR
        ? Long.MAX_VALUE : maxEngineBytes * ONE_PARTITION_FACTOR;
    if (s.partitions() == 1) {
      if (s.estimatedBytes() <= onePartitionBound) {
        return new Decision(false, "it has one reduce partition: " + s.maps() + " blocks, one"
            + " per map, read by one task; an estimated " + bytes(s.estimatedBytes()) + " ("
            + s.estimateSource() + ") is at most " + bytes(onePartitionBound));
      }
      return new Decision(true, "it has one reduce partition, but an estimated "
          + s.estimatedBytes() + " bytes (" + s.estimateSource() + ") is more than "
          + onePartitionBound + " (" + ONE_PARTITION_FACTOR + " x " + bytes(maxEngineBytes)
          + ")");
    }
    if (s.estimatedBytes() > maxEngineBytes) {
      return new Decision(true, "an estimated " + bytes(s.estimatedBytes()) + " ("
          + s.estimateSource() + ") is more than " + bytes(maxEngineBytes));
    }
    return new Decision(false, "an estimated " + bytes(s.estimatedBytes()) + " ("
        + s.estimateSource() + ") is at most " + bytes(maxEngineBytes));
  }

  /** Bytes in the unit a reader takes in at a glance. */
  static String bytes(long n) {
    if (n < 10 * 1024) {
      return n + " B";
    }
    if (n < 10L << 20) {
      return (n >> 10) + " KiB";
    }
    if (n < 10L << 30) {
      return (n >> 20) + " MiB";
    }
    return (n >> 30) + " GiB";
  }
}
