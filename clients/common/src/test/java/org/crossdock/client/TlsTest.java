package org.crossdock.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.crossdock.client.fetch.FetchScheduler;
import org.crossdock.protocol.Message;
import org.crossdock.protocol.Structures.CommitStatus;
import org.crossdock.protocol.Structures.PartitionStat;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The JDK's TLS against a real {@code crossdock standalone} run with TLS (certificates made by
 * {@code crossdock tls-certs}): a shuffle pushed, committed and fetched exactly; a client that
 * trusts another authority, or speaks plain TCP, is refused.
 */
class TlsTest {
  @AfterEach
  void plainAgain() {
    Net.useTls(null);
  }

  /** Runs {@code crossdock tls-certs} into a new directory; returns it. */
  static Path certs(String hosts) throws Exception {
    Path dir = Files.createTempDirectory("crossdock-java-tls");
    Process p = new ProcessBuilder(CrossdockServer.binary().toString(), "tls-certs", "--out",
        dir.toString(), "--hosts", hosts).redirectErrorStream(true).start();
    assertTrue(p.waitFor(30, TimeUnit.SECONDS));
    assertEquals(0, p.exitValue(), new String(p.getInputStream().readAllBytes()));
    return dir;
  }

  static CrossdockServer tlsServer(Path certs) throws Exception {
    return CrossdockServer.start("--tls-cert", certs.resolve("cert.pem").toString(), "--tls-key",
        certs.resolve("key.pem").toString(), "--tls-ca", certs.resolve("ca.pem").toString());
  }

  @Test
  void aShuffleRunsOverTls() throws Exception {
    Path certs = certs("127.0.0.1");
    try (CrossdockServer server = tlsServer(certs)) {
      Net.useTls(Tls.trusting(certs.resolve("ca.pem")));
      String app = "java-tls";
      try (CoordinatorClient coord = new CoordinatorClient(server.addr(), 3000, 30_000);
          ConnectionPool pool = new ConnectionPool(3000)) {
        byte[] token = coord.registerApp(app, 60_000);
        pool.authenticateAs(app, token);
        Placement pl = coord.registerShuffle(app, 0, 2, 2);
        for (int map = 0; map < 2; map++) {
          List<PartitionStat> stats = new ArrayList<>();
          try (MapPusher p = new MapPusher(pool, app, 0, map, 0, 2, 1 << 20, 30_000)) {
            for (int part = 0; part < 2; part++) {
              p.push(part, pl.addrOf(part), RealServerTest.payload(map, part, 0, 5000), 5000);
              stats.add(new PartitionStat(part, 5000, 1));
            }
            p.awaitAll();
          }
          assertEquals(CommitStatus.COMMITTED, coord.commitMap(app, 0, map, 0, stats).status());
        }
        for (int part = 0; part < 2; part++) {
          byte[] got;
          try (FetchScheduler f = RealServerTest.fetcher(pl, app, 0, part, 0, 2)) {
            got = RealServerTest.readAll(f, null);
          }
          assertArrayEquals(RealServerTest.expected(part, 0, 2, 1, m -> 5000), got);
        }
        Message.ShuffleStatus st = coord.shuffleStatus(app, 0);
        assertEquals(2, st.committedMaps());
      }
    }
  }

  @Test
  void anotherAuthorityAndPlainTcpAreRefused() throws Exception {
    Path certs = certs("127.0.0.1");
    Path other = certs("127.0.0.1");
    try (CrossdockServer server = tlsServer(certs)) {
      Net.useTls(Tls.trusting(other.resolve("ca.pem")));
      CrossdockException e = assertThrows(CrossdockException.class,
          () -> new CoordinatorClient(server.addr(), 3000, 5000));
      assertEquals(CrossdockException.Kind.PROTOCOL, e.kind(), e.getMessage());
      assertTrue(e.getMessage().contains("TLS handshake with Crossdock coordinator failed"),
          e.getMessage());
      // Plain TCP: the server takes the request for a broken TLS handshake and closes the
      // connection; nothing is answered. (One connection, not the coordinator client, which
      // would retry for a minute.)
      Net.useTls(null);
      RpcConnection plain = RpcConnection.connect("Crossdock coordinator", server.addr(), 3000);
      try {
        ExecutionException ee = assertThrows(ExecutionException.class,
            () -> plain.call(new Message.RegisterApp("plain", 60_000)).get(10, TimeUnit.SECONDS));
        assertInstanceOf(CrossdockException.class, ee.getCause());
        assertTrue(((CrossdockException) ee.getCause()).isTransport(), ee.getMessage());
      } finally {
        plain.close();
      }
      // The right authority is served.
      Net.useTls(Tls.trusting(certs.resolve("ca.pem")));
      try (CoordinatorClient c = new CoordinatorClient(server.addr(), 3000, 5000)) {
        c.registerApp("right", 60_000);
      }
    }
  }
}
