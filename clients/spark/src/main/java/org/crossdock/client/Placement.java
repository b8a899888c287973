package org.crossdock.client;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.crossdock.protocol.Message;

/** Where each partition of a shuffle lives: a compact, serializable form of ShufflePlacement. */
public final class Placement implements Serializable {
  private static final long serialVersionUID = 2L;

  private final String[] addrs;
  /** The host label of each of addrs' workers (what Spark calls the executors there). */
  private final String[] hosts;
  private final int[] partitionAddr;
  /** Index into addrs of each partition's replica, -1 where there is none. */
  private final int[] replicaAddr;

  /** A placement whose workers' hosts are their addresses' host parts. */
  public Placement(String[] addrs, int[] partitionAddr, int[] replicaAddr) {
    this(addrs, hostParts(addrs), partitionAddr, replicaAddr);
  }

  public Placement(String[] addrs, String[] hosts, int[] partitionAddr, int[] replicaAddr) {
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
    return new Placement(addrs, hosts, out, replicas);
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

  /** The host of the worker that holds {@code partition}: its host label (by default its address without the port). */
  public String hostOf(int partition) {
    return hosts[partitionAddr[partition]];
  }

  /** The host of the worker with {@code partition}'s replica, or null. */
  public String replicaHostOf(int partition) {
    int i = replicaAddr[partition];
    return i < 0 ? null : hosts[i];
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
