package org.crossdock.client;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real {@code crossdock standalone} (coordinator + 2 workers, more settings as extra arguments)
 * as a child process; or ({@link #startWorkerAdvertising}) a {@code crossdock coordinator} and a
 * {@code crossdock worker} as two, the worker telling clients another address than its own.
 */
public final class CrossdockServer implements AutoCloseable {
  private final List<Process> processes;
  private final Path dataDir;
  private final String addr;
  /** The worker's own address (not the one it advertises); null for a standalone. */
  private final String workerAddr;

  private CrossdockServer(List<Process> processes, Path dataDir, String addr, String workerAddr) {
    this.processes = processes;
    this.dataDir = dataDir;
    this.addr = addr;
    this.workerAddr = workerAddr;
  }

  /** The repository root: the nearest ancestor holding Cargo.toml and testdata/. */
  public static Path repoRoot() {
    Path p = Path.of("").toAbsolutePath();
    while (p != null) {
      if (Files.exists(p.resolve("testdata/protocol/vectors.json"))) {
        return p;
      }
      p = p.getParent();
    }
    throw new IllegalStateException("repository root not found above " + Path.of("").toAbsolutePath());
  }

  /** The cluster secret of every test server. */
  public static final byte[] SECRET =
      "the Java tests' cluster secret, 32 bytes or more".getBytes(StandardCharsets.UTF_8);

  /** The token of {@code app}, as the coordinator hands it to the app's driver. */
  public static byte[] token(String app) {
    return org.crossdock.protocol.Auth.appToken(SECRET, app);
  }

  /**
   * The server binary the tests start: {@code CROSSDOCK_BIN} when set (make test sets the debug
   * build that its Rust tests already built), else the release build.
   */
  public static Path binary() {
    String env = System.getenv("CROSSDOCK_BIN");
    Path bin = env != null && !env.isEmpty()
        ? repoRoot().resolve(env) : repoRoot().resolve("target/release/crossdock");
    if (!Files.isExecutable(bin)) {
      throw new IllegalStateException(bin + " is missing: run `cargo build --release -p crossdock` "
          + "first (make build does it before Maven), or set CROSSDOCK_BIN to a built binary");
    }
    return bin;
  }

  public static CrossdockServer start(String... extraArgs) throws Exception {
    return startWithMemory("256MiB", extraArgs);
  }

  /** A server whose workers each have {@code memory} (e.g. "1GiB") of memory budget. */
  public static CrossdockServer startWithMemory(String memory, String... extraArgs)
      throws Exception {
    Path bin = binary();
    Path dir = Files.createTempDirectory("crossdock-java-test");
    // A cluster secret the tests know, so they can act for any app as its executors would.
    Path secretFile = dir.resolve("secret");
    Files.write(secretFile, SECRET);
    List<String> cmd = new ArrayList<>(List.of(bin.toString(), "standalone", "--listen",
        "127.0.0.1:0", "--workers", "2", "--memory", memory, "--data-dir", dir.toString(),
        "--metrics-listen", "off", "--secret-file", secretFile.toString()));
    cmd.addAll(List.of(extraArgs));
    Process p = launch(cmd, dir.resolve("stderr.log"));
    String addr = listeningAddr(p, "crossdock standalone listening on ", dir.resolve("stderr.log"));
    return new CrossdockServer(List.of(p), dir, addr, null);
  }

  /**
   * A coordinator and one worker (with {@code memory}) as processes of their own, the worker
   * advertising {@code advertise} to clients instead of its own address ({@link #workerAddr}):
   * e.g. a proxy in front of it.
   */
  public static CrossdockServer startWorkerAdvertising(String advertise, String memory)
      throws Exception {
    Path bin = binary();
    Path dir = Files.createTempDirectory("crossdock-java-test");
    Path secretFile = dir.resolve("secret");
    Files.write(secretFile, SECRET);
    Path coordDir = Files.createDirectories(dir.resolve("coordinator"));
    Path workerDir = Files.createDirectories(dir.resolve("worker"));
    Process c = launch(List.of(bin.toString(), "coordinator", "--listen", "127.0.0.1:0",
        "--data-dir", coordDir.toString(), "--metrics-listen", "off",
        "--secret-file", secretFile.toString()), dir.resolve("coordinator.log"));
    try {
      String addr = listeningAddr(c, "crossdock coordinator listening on ", dir.resolve("coordinator.log"));
      Process w = launch(List.of(bin.toString(), "worker", "--log", "info", "--coordinator", addr, "--listen",
          "127.0.0.1:0", "--advertise-addr", advertise, "--memory", memory, "--data-dir",
          workerDir.toString(), "--metrics-listen", "off", "--secret-file", secretFile.toString()),
          dir.resolve("worker.log"));
      try {
        String line = listeningAddr(w, "crossdock worker listening on ", dir.resolve("worker.log"));
        // It registers after it listens: until then the coordinator would place nothing on it.
        awaitLine(w, dir.resolve("worker.log"), "registered with the coordinator");
        return new CrossdockServer(List.of(w, c), dir, addr, line.substring(0, line.indexOf(' ')));
      } catch (Exception e) {
        w.destroyForcibly();
        throw e;
      }
    } catch (Exception e) {
      c.destroyForcibly();
      throw e;
    }
  }

  /** Waits up to 20 s for {@code text} in the log {@code p} writes to {@code log}. */
  private static void awaitLine(Process p, Path log, String text) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!(Files.exists(log) && Files.readString(log).contains(text))) {
      if (!p.isAlive() || System.nanoTime() > deadline) {
        String err = Files.exists(log) ? Files.readString(log) : "";
        throw new IllegalStateException("crossdock never logged '" + text + "'\n" + err);
      }
      Thread.sleep(20);
    }
  }

  private static Process launch(List<String> cmd, Path stderr) throws IOException {
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.redirectError(stderr.toFile());
    return pb.start();
  }

  /**
   * The rest of the line of {@code p}'s standard output that begins with {@code prefix} (its
   * address, first), within 20 s; the process is killed if it does not come.
   */
  private static String listeningAddr(Process p, String prefix, Path stderr) throws Exception {
    CompletableFuture<String> listening = new CompletableFuture<>();
    Thread t = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(
          new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) {
          if (line.startsWith(prefix)) {
            listening.complete(line.substring(prefix.length()).trim());
          }
        }
        listening.completeExceptionally(new IOException("crossdock exited before listening"));
      } catch (IOException e) {
        listening.completeExceptionally(e);
      }
    }, "crossdock-stdout");
    t.setDaemon(true);
    t.start();
    try {
      return listening.get(20, TimeUnit.SECONDS);
    } catch (Exception e) {
      p.destroyForcibly();
      String err = Files.exists(stderr) ? Files.readString(stderr) : "";
      throw new IllegalStateException("crossdock (" + prefix.trim() + ") did not start: " + e + "\n" + err, e);
    }
  }

  /**
   * Sockets bound to a loopback port and never listening, kept for the JVM's lifetime: a connect
   * to one is refused, and no other process can take its port meanwhile.
   */
  private static final List<Socket> HELD_PORTS = new ArrayList<>();

  /**
   * A local address nothing listens on, for as long as this JVM runs: its port stays bound here
   * (not listening), so another test's server cannot be handed it, as it could a port merely
   * found free a moment before.
   */
  public static synchronized String unusedAddr() throws IOException {
    Socket s = new Socket();
    s.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
    HELD_PORTS.add(s);
    return "127.0.0.1:" + s.getLocalPort();
  }

  /** The directory the cluster keeps its data under (its workers' partition files included). */
  public Path dataDir() {
    return dataDir;
  }

  /** The coordinator's address. */
  public String addr() {
    return addr;
  }

  /** The address the worker of {@link #startWorkerAdvertising} listens on. */
  public String workerAddr() {
    return workerAddr;
  }

  /**
   * Closes a test class's clients and then its server, in the order given, skipping those never
   * opened (a failed start).
   */
  public static void closeAll(AutoCloseable... opened) throws Exception {
    for (AutoCloseable c : opened) {
      if (c != null) {
        c.close();
      }
    }
  }

  @Override
  public void close() throws Exception {
    for (Process process : processes) {
      process.destroy();
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
      }
    }
    try (Stream<Path> s = Files.walk(dataDir)) {
      s.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
    }
  }
}
