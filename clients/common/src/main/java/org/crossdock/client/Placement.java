package org.crossdock.client;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.crossdock.protocol.AttemptIds;
import org.crossdock.protocol.Message;

/**
 * Where each partition of a shuffle lives: a compact, serializable form of ShufflePlacement.
 *
 * <p>A hot partition may have been split (continued on other workers): its splits are slots
 * numbered from {@link #numPartitions} on, each with its own primary and replica, and a reader
 * reads every slot of the partition ({@link #slotsOf}). The methods taking a partition accept any
 * slot.
 */
public final class Placement implements Serializable {
  private static final long serialVersionUID = 4L;

  private final String[] addrs;
  /** The host label of each of addrs' workers (what Spark calls the executors there). */
  private final String[] hosts;
  private final int[] partitionAddr;
  /** Index into addrs of each partition's replica, -1 where there is none. */
  private final int[] replicaAddr;
  /** The shuffle's partitions; the slots past them are splits. */
  private final int partitions;
  /** The partition of each split slot (slot {@code partitions + i}). */
  private final int[] splitParents;
  /**
   * Per partition, the slot whose host a reduce task should prefer (from a status that counted
   * bytes): on the host holding most of the partition's committed bytes, that host's slot with
   * the most of them; null: each partition's own slot.
   */
  private final int[] readSlot;
  /**
   * Each map's committed attempt when this placement was read from a shuffle status ({@link
   * AttemptIds#NO_ATTEMPT} for a map not committed then); null for a placement made at
   * registration. What readers check stored records against ({@link
   * org.crossdock.client.fetch.Segment#acceptingRecords}).
   */
  private final int[] mapAttempts;

  /** A placement whose workers' hosts are their addresses' host parts. */
  public Placement(String[] addrs, int[] partitionAddr, int[] replicaAddr) {
    this(addrs, hostParts(addrs), partitionAddr, replicaAddr);
  }

  public Placement(String[] addrs, String[] hosts, int[] partitionAddr, int[] replicaAddr) {
    this(addrs, hosts, partitionAddr, replicaAddr, partitionAddr.length, new int[0], null, null);
  }

  private Placement(String[] addrs, String[] hosts, int[] partitionAddr, int[] replicaAddr,
      int partitions, int[] splitParents, int[] readSlot, int[] mapAttempts) {
    if (partitions + splitParents.length != partitionAddr.length) {
      throw new IllegalArgumentException(partitionAddr.length + " slots for " + partitions
          + " partitions and " + splitParents.length + " splits");
    }
    for (int parent : splitParents) {
      if (parent < 0 || parent >= partitions) {
        throw new IllegalArgumentException("a split of partition "
            + Integer.toUnsignedString(parent) + " of a shuffle of " + partitions);
      }
    }
    this.partitions = partitions;
    this.splitParents = splitParents;
    this.readSlot = readSlot;
    this.mapAttempts = mapAttempts;
    if (hosts.length != addrs.length) {
      throw new IllegalArgumentException(
          hosts.length + " host labels for " + addrs.length + " worker addresses");
    }
    this.addrs = addrs;
    this.hosts = hosts;
    this.partitionAddr = partitionAddr;
    this.replicaAddr = replicaAddr;
  }

  private static String[] hostParts(String[] addrs) {
    String[] out = new String[addrs.length];
    for (int i = 0; i < addrs.length; i++) {
      out[i] = hostPart(addrs[i]);
    }
    return out;
  }

  /**
   * Builds a placement from the coordinator's worker list and per-partition primary and
   * replica worker ids ({@link Message#NO_WORKER} for none).
   */
  public static Placement of(
      List<Message.WorkerInfo> workers, int[] partitionWorkers, int[] partitionReplicas) {
    return of(workers, partitionWorkers, partitionReplicas, partitionWorkers.length, null);
  }

  /**
   * The placement of a shuffle's status: its partitions and their splits, and for a split
   * partition the host holding most of its committed bytes, summed over its slots there (where
   * its reduce task should run; ties keep the partition's own slot's host).
   */
  public static Placement of(Message.ShuffleStatus s) {
    Placement p = of(s.workers(), s.partitionWorkers(), s.partitionReplicas(), s.numPartitions(),
        s.splitParents());
    int[] parents = p.splitParents;
    long[] bytes = s.partitionBytes();
    if (parents.length == 0 || bytes == null || bytes.length != p.partitionAddr.length) {
      return new Placement(p.addrs, p.hosts, p.partitionAddr, p.replicaAddr, p.partitions, parents,
          null, s.mapAttempts());
    }
    int[] read = new int[p.partitions];
    for (int i = 0; i < read.length; i++) {
      read[i] = i;
    }
    java.util.Set<Integer> split = new java.util.HashSet<>();
    for (int parent : parents) {
      split.add(parent);
    }
    for (int partition : split) {
      int[] slots = p.slotsOf(partition);
      Map<String, Long> byHost = new HashMap<>();
      for (int slot : slots) {
        byHost.merge(p.hosts[p.partitionAddr[slot]], bytes[slot], Long::sum);
      }
      String best = p.hosts[p.partitionAddr[partition]];
      for (Map.Entry<String, Long> e : byHost.entrySet()) {
        if (e.getValue() > byHost.get(best)) {
          best = e.getKey();
        }
      }
      int chosen = partition;
      for (int slot : slots) {
        boolean there = p.hosts[p.partitionAddr[slot]].equals(best);
        if (there && (!p.hosts[p.partitionAddr[chosen]].equals(best) || bytes[slot] > bytes[chosen])) {
          chosen = slot;
        }
      }
      read[partition] = chosen;
    }
    return new Placement(p.addrs, p.hosts, p.partitionAddr, p.replicaAddr, p.partitions, parents,
        read, s.mapAttempts());
  }

  /**
   * As above, for {@code partitions} partitions whose splits' partitions are {@code
   * splitParents} (null: none), the per-slot lists covering both.
   */
  public static Placement of(List<Message.WorkerInfo> workers, int[] partitionWorkers,
      int[] partitionReplicas, int partitions, int[] splitParents) {
    Map<Integer, Integer> index = new HashMap<>();
    List<Message.WorkerInfo> used = new ArrayList<>();
    int[] out = new int[partitionWorkers.length];
    int[] replicas = new int[partitionWorkers.length];
    for (int p = 0; p < partitionWorkers.length; p++) {
      out[p] = indexOf(workers, partitionWorkers[p], index, used);
      int r = p < partitionReplicas.length ? partitionReplicas[p] : Message.NO_WORKER;
      replicas[p] = r == Message.NO_WORKER ? -1 : indexOf(workers, r, index, used);
    }
    String[] addrs = new String[used.size()];
    String[] hosts = new String[used.size()];
    for (int i = 0; i < addrs.length; i++) {
      Message.WorkerInfo w = used.get(i);
      addrs[i] = w.addr();
      // An empty label (a coordinator that sent none) falls back to the address.
      hosts[i] = w.host() == null || w.host().isEmpty() ? hostPart(w.addr()) : w.host();
    }
    return new Placement(addrs, hosts, out, replicas, partitions,
        splitParents == null ? new int[0] : splitParents.clone(), null, null);
  }

  private static int indexOf(
      List<Message.WorkerInfo> workers, int id, Map<Integer, Integer> index,
      List<Message.WorkerInfo> used) {
    Integer i = index.get(id);
    if (i == null) {
      Message.WorkerInfo found = null;
      for (Message.WorkerInfo w : workers) {
        if (w.id() == id) {
          found = w;
        }
      }
      if (found == null) {
        throw new IllegalArgumentException(
            "placement names worker " + Integer.toUnsignedString(id) + " that is not in its worker list");
      }
      i = used.size();
      used.add(found);
      index.put(id, i);
    }
    return i;
  }

  /**
   * Each map's committed attempt when this placement was read from a shuffle status; null for
   * one made at registration (then readers take checked chunks only). The array is shared by
   * every reader of this placement: read it, never write it.
   */
  public int[] mapAttempts() {
    return mapAttempts;
  }

  /** The shuffle's partitions (its splits not counted). */
  public int numPartitions() {
    return partitions;
  }

  /** The slots a reader of {@code partition} reads: the partition, then its splits in order. */
  public int[] slotsOf(int partition) {
    int n = 1;
    for (int parent : splitParents) {
      n += parent == partition ? 1 : 0;
    }
    int[] out = new int[n];
    out[0] = partition;
    for (int i = 0, k = 1; i < splitParents.length; i++) {
      if (splitParents[i] == partition) {
        out[k++] = partitions + i;
      }
    }
    return out;
  }

  /** The data address of {@code slot}'s primary, or null for a slot this placement predates. */
  public String addrOfSlot(int slot) {
    return slot >= 0 && slot < partitionAddr.length ? addrOf(slot) : null;
  }

  /** The partition a slot belongs to: itself, or the partition it is a split of. */
  public int partitionOf(int slot) {
    return slot < partitions ? slot : splitParents[slot - partitions];
  }

  /** The data address ({@code host:port}) of the worker that holds {@code partition}. */
  public String addrOf(int partition) {
    return addrs[partitionAddr[partition]];
  }

  /** The data address of the worker with {@code partition}'s replica, or null. */
  public String replicaOf(int partition) {
    int i = replicaAddr[partition];
    return i < 0 ? null : addrs[i];
  }

  /** Where to read {@code partition} from, in order: its primary, then its replica. */
  public List<String> copiesOf(int partition) {
    String r = replicaOf(partition);
    return r == null ? List.of(addrOf(partition)) : List.of(addrOf(partition), r);
  }

  /**
   * The host a reduce task of {@code partition} should run on: the host label (by default the
   * address without the port) of the worker holding the partition, or for a split partition
   * whose status counted bytes, of the host holding most of them.
   */
  public String hostOf(int partition) {
    return hosts[partitionAddr[readSlotOf(partition)]];
  }

  /** The host of the replica of {@link #hostOf}'s slot, or null. */
  public String replicaHostOf(int partition) {
    int i = replicaAddr[readSlotOf(partition)];
    return i < 0 ? null : hosts[i];
  }

  private int readSlotOf(int partition) {
    return readSlot != null && partition >= 0 && partition < partitions
        ? readSlot[partition] : partition;
  }

  private static String hostPart(String addr) {
    int colon = addr.lastIndexOf(':');
    String host = colon < 0 ? addr : addr.substring(0, colon);
    return host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
  }

  /** The distinct worker addresses. */
  public List<String> workerAddrs() {
    return List.of(addrs);
  }
}
