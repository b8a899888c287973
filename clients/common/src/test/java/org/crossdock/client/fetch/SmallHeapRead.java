package org.crossdock.client.fetch;

import java.io.DataInputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import org.crossdock.protocol.FrameHeader;
import org.crossdock.protocol.Kinds;

/**
 * A reduce task's read in a JVM whose heap cannot hold the frame its worker announces, run by
 * {@link SmallHeapReadTest} with {@code -Xmx16m}: the connection's thread meets a real {@link
 * OutOfMemoryError} allocating the body, and the task must meet it too, at once, rather than
 * wait for answers that thread will never read. The "worker" answers the first fetch request
 * with the header of a 48 MiB chunk (within the protocol's limit) and then holds the connection
 * open. Prints {@code TASK GOT <error>} and exits 0 when the task met the error.
 */
final class SmallHeapRead {
  private SmallHeapRead() {}

  public static void main(String[] args) throws Exception {
    try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      Thread worker = new Thread(() -> {
        try (Socket s = ss.accept()) {
          DataInputStream in = new DataInputStream(s.getInputStream());
          byte[] raw = new byte[FrameHeader.LEN];
          in.readFully(raw);
          FrameHeader request = FrameHeader.decode(raw, 0);
          in.readFully(new byte[request.bodyLen()]);
          OutputStream out = s.getOutputStream();
          out.write(FrameHeader.of(Kinds.KIND_FETCH_CHUNK, request.requestId(), 48 << 20).encode());
          out.flush();
          Thread.sleep(Long.MAX_VALUE);
        } catch (Exception e) {
          // the read closed the connection: done
        }
      }, "fake-worker");
      worker.setDaemon(true);
      worker.start();
      String addr = "127.0.0.1:" + ss.getLocalPort();
      // No token: no handshake. A read timeout of a minute: the test gives up before it.
      FetchScheduler.Settings settings = new FetchScheduler.Settings("app", null, 1,
          FetchScheduler.Policy.ADAPTIVE, 48 << 20, 2 << 20, 3000, 60_000, 3, 200);
      try (FetchScheduler f = new FetchScheduler(settings,
          List.of(new Segment(0, 0, 1, 1, List.of(addr))), new FetchMonitor(),
          FetchMemory.UNLIMITED, a -> false)) {
        f.next();
        System.out.println("UNEXPECTED a batch");
        System.exit(2);
      } catch (FetchScheduler.SegmentFailed e) {
        try {
          e.throwIfLocal();
          System.out.println("NOT LOCAL " + e);
          System.exit(3);
        } catch (OutOfMemoryError oom) {
          System.out.println("TASK GOT " + oom);
          System.exit(0);
        }
      }
    }
  }
}
