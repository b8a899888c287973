package org.crossdock.client.fetch;

import java.io.DataInputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.crossdock.client.RpcConnection;
import org.crossdock.protocol.Message;
import org.crossdock.protocol.FrameHeader;
import org.crossdock.protocol.Kinds;

/**
 * A reduce task's read ({@code fetch}) or a call on a connection the executor's tasks share
 * ({@code rpc}) in a JVM whose heap cannot hold the frame its worker announces, run by {@link
 * SmallHeapReadTest} with {@code -Xmx16m}: the connection's thread meets a real {@link
 * OutOfMemoryError} allocating the body. The read's task must meet that error, at once; the
 * shared connection's call must fail at once as for a broken connection. Neither may wait for
 * answers that thread will never read. The "worker" answers the first request with the header of
 * a 48 MiB frame (within the protocol's limit) and then holds the connection open. Prints {@code
 * TASK GOT <error>} or {@code CALL FAILED <error>} and exits 0.
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
          int kind = args[0].equals("rpc") ? Kinds.KIND_OK : Kinds.KIND_FETCH_CHUNK;
          out.write(FrameHeader.of(kind, request.requestId(), 48 << 20).encode());
          out.flush();
          Thread.sleep(Long.MAX_VALUE);
        } catch (Exception e) {
          // the read closed the connection: done
        }
      }, "fake-worker");
      worker.setDaemon(true);
      worker.start();
      String addr = "127.0.0.1:" + ss.getLocalPort();
      if (args[0].equals("rpc")) {
        RpcConnection c = RpcConnection.connect("Crossdock worker", addr, 3000);
        try {
          c.call(new Message.Hello()).get(60, TimeUnit.SECONDS);
          System.out.println("UNEXPECTED an answer");
          System.exit(2);
        } catch (ExecutionException e) {
          System.out.println("CALL FAILED " + e.getCause());
          System.exit(0);
        }
      }
      // No token: no handshake. A read timeout of a minute: the test gives up before it.
      FetchScheduler.Settings settings = new FetchScheduler.Settings("app", null, 1,
          FetchScheduler.Policy.ADAPTIVE, 48 << 20, 2 << 20, 3000, 60_000, 3, 200);
      try (FetchScheduler f = new FetchScheduler(settings,
          List.of(new Segment(0, 0, 1, 1, List.of(addr))), new FetchMonitor(),
          FetchMemory.UNLIMITED, a -> false)) {
        f.next();
        System.out.println("UNEXPECTED a batch");
        System.exit(2);
      } catch (OutOfMemoryError oom) {
        System.out.println("TASK GOT " + oom);
        System.exit(0);
      } catch (java.io.IOException e) {
        System.out.println("NOT THE ERROR " + e);
        System.exit(3);
      }
    }
  }
}
