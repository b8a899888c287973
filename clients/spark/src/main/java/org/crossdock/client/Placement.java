package org.crossdock.client;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.crossdock.protocol.Message;

/** Where each partition of a shuffle lives: a compact, serializable form of ShufflePlacement. */
public final class Placement implements Serializable {
  private static final long serialVersionUID = 1L;

  private final String[] addrs;
  private final int[] partitionAddr;
  /** Index into addrs of each partition's replica, -1 where there is none. */
  private final int[] replicaAddr;

  public Placement(String[] addrs, int[] partitionAddr, int[] replicaAddr) {
    this.addrs = addrs;
    this.partitionAddr = partitionAddr;
    this.replicaAddr = replicaAddr;
  }

  /**
   * Builds a placement from the coordinator's worker list and per-partition primary and
   * replica worker ids ({@link Message#NO_WORKER} for none).
   */
  public static Placement of(
      List<Message.WorkerInfo> workers, int[] partitionWorkers, int[] partitionReplicas) {
    Map<Integer, Integer> index = new HashMap<>();
    List<String> addrs = new ArrayList<>();
    int[] out = new int[partitionWorkers.length];
    int[] replicas = new int[partitionWorkers.length];
    for (int p = 0; p < partitionWorkers.length; p++) {
      out[p] = indexOf(workers, partitionWorkers[p], index, addrs);
      int r = p < partitionReplicas.length ? partitionReplicas[p] : Message.NO_WORKER;
      replicas[p] = r == Message.NO_WORKER ? -1 : indexOf(workers, r, index, addrs);
    }
    return new Placement(addrs.toArray(new String[0]), out, replicas);
  }

  private static int indexOf(
      List<Message.WorkerInfo> workers, int id, Map<Integer, Integer> index, List<String> addrs) {
    {
      Integer i = index.get(id);
      if (i == null) {
        String addr = null;
        for (Message.WorkerInfo w : workers) {
          if (w.id() == id) {
            addr = w.addr();
          }
        }
        if (addr == null) {
          throw new IllegalArgumentException(
              "placement names worker " + Integer.toUnsignedString(id) + " that is not in its worker list");
        }
        i = addrs.size();
        addrs.add(addr);
        index.put(id, i);
      }
      return i;
    }
  }

  public int numPartitions() {
    return partitionAddr.length;
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

  /** The host of the worker that holds {@code partition}: its address without the port. */
  public String hostOf(int partition) {
    return hostPart(addrOf(partition));
  }

  /** The host of the worker with {@code partition}'s replica, or null. */
  public String replicaHostOf(int partition) {
    String r = replicaOf(partition);
    return r == null ? null : hostPart(r);
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
