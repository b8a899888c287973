package org.crossdock.client.fetch;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Fetch connections an executor keeps open between its reduce tasks. Opening one costs a TCP
 * connect, the handshake that proves the app (two more round trips with a cluster secret) and a
 * thread, and a task reads each worker through one connection of its own: paid per task and
 * worker, that was most of the reader's fetch wait above Spark's own, whose connections outlive
 * its tasks. A task's connection comes back here when the task ends with nothing unanswered on
 * it ({@link SourceStream#release}); the next task that reads the same worker for the same app
 * takes it ({@link #take}). Connections are keyed by worker and app, and by the app's token, so a
 * connection never serves a task of an app it did not prove.
 *
 * <p>An idle connection's thread keeps reading: when the worker closes it (its idle timeout, a
 * restart), the thread takes it out of here and closes it. One the worker closed just before a
 * task took it fails that task's first request, which is asked again without using up a retry
 * ({@link SourceStream}), and the key's other idle connections are closed, so the retry opens a
 * new one. At most {@link #MAX_PER_KEY} idle connections are kept per key (an executor runs at
 * most as many tasks at once as it has cores); more are closed. An idle connection is closed
 * after {@link SourceStream#IDLE_LIMIT_NANOS} (so a finished app's do not linger), and TCP
 * keepalive ends one whose host vanished.
 */
final class IdleStreams {
  /** The most idle connections kept per worker and app. */
  static final int MAX_PER_KEY = 16;

  private record Key(String addr, String appId, ByteBuffer token) {}

  private final Map<Object, ArrayDeque<SourceStream>> idle = new HashMap<>();
  private long opened;
  private long reused;

  /** The key of a connection to {@code addr} that proves {@code appId}'s {@code token}. */
  static Object key(String addr, String appId, byte[] token) {
    return new Key(addr, appId, ByteBuffer.wrap(token == null ? new byte[0] : token.clone()));
  }

  /**
   * An idle connection to {@code addr} proving {@code appId}'s token, bound to the read {@code
   * b}; or null if none is idle (the caller opens one and counts it with {@link #opened}).
   */
  synchronized SourceStream take(String addr, String appId, byte[] token, SourceStream.Binding b) {
    Object k = key(addr, appId, token);
    ArrayDeque<SourceStream> q = idle.get(k);
    SourceStream st = q == null ? null : q.pollLast(); // the most recently used: least likely stale
    if (st == null) {
      return null;
    }
    if (q.isEmpty()) {
      idle.remove(k);
    }
    st.bindIdle(b);
    reused++;
    return st;
  }

  /** Counts a connection opened because none was idle. */
  synchronized void opened() {
    opened++;
  }

  /**
   * Keeps {@code st} for the next task, bound to no read; false (it is not kept, and stays
   * bound) when its key has its fill.
   */
  synchronized boolean put(SourceStream st) {
    ArrayDeque<SourceStream> q = idle.computeIfAbsent(st.poolKey, k -> new ArrayDeque<>());
    if (q.size() >= MAX_PER_KEY) {
      return false;
    }
    st.unbind();
    q.addLast(st);
    return true;
  }

  /** Closes every idle connection of {@code key} (a worker and app whose connection died). */
  void closeIdle(Object key) {
    ArrayDeque<SourceStream> q;
    synchronized (this) {
      q = idle.remove(key);
      if (q != null) {
        q.forEach(SourceStream::markClosed); // before the list lets go: see markClosed
      }
    }
    if (q != null) {
      for (SourceStream st : q) {
        st.closeIdle();
      }
    }
  }

  /** Closes every idle connection. */
  void closeAll() {
    List<ArrayDeque<SourceStream>> all;
    synchronized (this) {
      all = new ArrayList<>(idle.values());
      idle.clear();
      all.forEach(q -> q.forEach(SourceStream::markClosed));
    }
    for (ArrayDeque<SourceStream> q : all) {
      for (SourceStream st : q) {
        st.closeIdle();
      }
    }
  }

  /** Removes {@code st} if it is idle here; false if a task has taken it. */
  synchronized boolean remove(SourceStream st) {
    Object k = st.poolKey;
    ArrayDeque<SourceStream> q = idle.get(k);
    if (q == null || !q.remove(st)) {
      return false;
    }
    if (q.isEmpty()) {
      idle.remove(k);
    }
    return true;
  }

  /** Connections opened for reads because none was idle. */
  synchronized long openedCount() {
    return opened;
  }

  /** Reads that took an idle connection instead of opening one. */
  synchronized long reusedCount() {
    return reused;
  }

  /** Connections idle now. */
  synchronized int idleCount() {
    int n = 0;
    for (ArrayDeque<SourceStream> q : idle.values()) {
      n += q.size();
    }
    return n;
  }
}
