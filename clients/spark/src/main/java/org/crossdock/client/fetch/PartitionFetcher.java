package org.crossdock.client.fetch;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.Closeable;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import org.crossdock.client.CrossdockException;
import org.crossdock.client.Net;
import org.crossdock.protocol.Codec;
import org.crossdock.protocol.Message;

/**
 * Reads the committed batches of one partition, maps {@code [startMap, endMap)}, from its worker,
 * in (map, batch sequence) order, checking every CRC32C, the order and the stream's batch count:
 * the simple sequential reader (tools and tests; reduce tasks use {@link FetchScheduler}).
 * A broken connection is resumed after the last delivered batch, up to {@code maxResumes} times,
 * so no batch is lost or delivered twice. A fetch owns its connection until its end.
 */
public final class PartitionFetcher implements Closeable {
  /** The partition's copies in the order to try them: primary first, then its replica. */
  private final List<String> copies;
  private int copy;
  private String addr;
  private final List<String> unreachable = new ArrayList<>();
  private final String appId;
  private final int shuffleId;
  private final int partition;
  private final int startMap;
  private final int endMap;
  private final int connectTimeoutMs;
  private final int readTimeoutMs;
  private final int maxResumes;

  private Socket socket;
  private DataInputStream in;
  private final ArrayDeque<Message.FetchedBatch> ready = new ArrayDeque<>();
  private Message.ResumePoint last;
  private boolean done;
  private boolean opened;
  private long receivedInStream;
  private int resumes;
  private long bytes;
  private long batches;

  /**
   * A fetcher that reads from {@code copies} in turn: when a copy fails for good (unreachable
   * after {@code maxResumes} reconnections, corrupt, or no longer holding the partition), the
   * stream continues from the next copy after the last batch delivered, so nothing is lost or
   * repeated. {@code resumeAfter} starts the stream after a given batch (null: from the start).
   */
  public PartitionFetcher(
      List<String> copies,
      String appId,
      int shuffleId,
      int partition,
      int startMap,
      int endMap,
      int connectTimeoutMs,
      int readTimeoutMs,
      int maxResumes,
      Message.ResumePoint resumeAfter) {
    if (copies.isEmpty()) {
      throw new IllegalArgumentException("no copy of partition " + partition + " to read from");
    }
    this.copies = List.copyOf(copies);
    this.addr = this.copies.get(0);
    this.last = resumeAfter;
    this.appId = appId;
    this.shuffleId = shuffleId;
    this.partition = partition;
    this.startMap = startMap;
    this.endMap = endMap;
    this.connectTimeoutMs = connectTimeoutMs;
    this.readTimeoutMs = readTimeoutMs;
    this.maxResumes = maxResumes;
  }

  /** The copy being read. */
  public String addr() {
    return addr;
  }

  /** The last batch delivered or queued, where a new stream would resume; null before any. */
  public Message.ResumePoint resumePoint() {
    return last;
  }

  /** Copies given up on because they could not be reached (to report to the coordinator). */
  public List<String> unreachable() {
    return List.copyOf(unreachable);
  }

  public int resumes() {
    return resumes;
  }

  /** Payload bytes delivered so far. */
  public long bytes() {
    return bytes;
  }

  public long batches() {
    return batches;
  }

  /** Breaks the current connection (tests use it to exercise resumption). */
  public void dropConnection() {
    closeSocket();
  }

  private void open() throws IOException {
    if (opened) {
      resumes++;
    }
    opened = true;
    Socket s = Net.connect("Crossdock worker", addr, connectTimeoutMs);
    try {
      s.setSoTimeout(readTimeoutMs);
      s.setReceiveBufferSize(1 << 20);
      OutputStream out = new BufferedOutputStream(s.getOutputStream());
      out.write(Codec.encodeFrame(
          new Message.Fetch(appId, shuffleId, partition, startMap, endMap, last), 1));
      out.flush();
      in = new DataInputStream(new BufferedInputStream(s.getInputStream(), 256 << 10));
    } catch (IOException e) {
      s.close();
      throw CrossdockException.transport(addr, "cannot send fetch", e);
    }
    socket = s;
    receivedInStream = 0;
  }

  private void closeSocket() {
    if (socket != null) {
      try {
        socket.close();
      } catch (IOException ignored) {
        // nothing to do
      }
    }
    socket = null;
    in = null;
  }

  private void readFrame() throws IOException {
    Message m = StreamFrames.read(in, addr).message();
    if (m instanceof Message.FetchChunk c) {
      for (Message.FetchedBatch b : c.batches()) {
        Segment.check(addr, partition, last, b);
        last = new Message.ResumePoint(b.mapId(), b.batchSeq());
        receivedInStream++;
        ready.add(b);
      }
    } else if (m instanceof Message.FetchEnd e) {
      if (e.batches() != receivedInStream) {
        throw CrossdockException.corrupt(addr, "worker announced " + e.batches()
            + " batches but sent " + receivedInStream);
      }
      done = true;
      closeSocket();
    } else if (m instanceof Message.Error e) {
      closeSocket();
      throw CrossdockException.remote(addr, e.code(), e.message());
    } else {
      throw CrossdockException.protocol(
          addr, "unexpected answer " + m.getClass().getSimpleName() + " to a fetch", null);
    }
  }

  /** The next batch, or null at the end of the range. */
  public Message.FetchedBatch next() throws IOException {
    while (true) {
      Message.FetchedBatch b = ready.poll();
      if (b != null) {
        bytes += b.payload().remaining();
        batches++;
        return b;
      }
      if (done) {
        return null;
      }
      boolean connecting = socket == null;
      try {
        if (socket == null) {
          open();
        }
        connecting = false;
        readFrame();
      } catch (CrossdockException e) {
        closeSocket();
        // A copy that cannot even be connected to is not retried while another exists:
        // each attempt would wait for the connect timeout.
        boolean unreachableCopy = connecting && copy + 1 < copies.size();
        if (e.isTransport() && resumes < maxResumes && !unreachableCopy) {
          continue;
        }
        if (e.isTransport()) {
          unreachable.add(addr);
        }
        if (copy + 1 < copies.size() && FetchScheduler.anotherCopyMayServe(e)) {
          copy++;
          addr = copies.get(copy);
          opened = false;
          resumes = 0;
          continue;
        }
        throw e;
      }
    }
  }

  @Override
  public void close() {
    closeSocket();
  }
}
