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

  public Placement(String[] addrs, int[] partitionAddr) {
    this.addrs = addrs;
    this.partitionAddr = partitionAddr;
  }

  /** Builds a placement from the coordinator's worker list and per-partition worker ids. */
  public static Placement of(List<Message.WorkerInfo> workers, int[] partitionWorkers) {
    Map<Integer, Integer> index = new HashMap<>();
    List<String> addrs = new ArrayList<>();
    int[] out = new int[partitionWorkers.length];
    for (int p = 0; p < partitionWorkers.length; p++) {
      int id = partitionWorkers[p];
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
      out[p] = i;
    }
    return new Placement(addrs.toArray(new String[0]), out);
  }

  public int numPartitions() {
    return partitionAddr.length;
  }

  /** The data address ({@code host:port}) of the worker that holds {@code partition}. */
  public String addrOf(int partition) {
    return addrs[partitionAddr[partition]];
  }

  /** The distinct worker addresses. */
  public List<String> workerAddrs() {
    return List.of(addrs);
  }
}
