package org.crossdock.mapreduce;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.TaskCompletionEvent;
import org.apache.hadoop.mapreduce.TaskCounter;
import org.apache.hadoop.mapreduce.v2.MiniMRYarnCluster;
import org.apache.hadoop.util.JarFinder;
import org.crossdock.client.CoordinatorClient;
import org.crossdock.client.CrossdockException;
import org.crossdock.client.CrossdockServer;
import org.crossdock.protocol.ErrorCode;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * MapReduce on a real YARN cluster in the test JVM (MiniMRYarnCluster: a ResourceManager and a
 * NodeManager that launches the application master and every task in a JVM of its own): the job
 * submitted with {@code mapreduce.framework.name=crossdock-yarn} is registered by the submitter,
 * its tasks in other processes read the app from the job's credentials, and its output equals
 * MapReduce's own shuffle's on the same cluster.
 */
@Timeout(600)
class MapReduceYarnTest {
  private static final String OPENS = String.join(" ",
      "--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-opens=java.base/java.util=ALL-UNNAMED",
      "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
      "--add-opens=java.base/java.io=ALL-UNNAMED", "--add-opens=java.base/java.net=ALL-UNNAMED",
      "--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
      "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED");
  private static CrossdockServer server;
  private static MiniMRYarnCluster yarn;
  /**
   * The Crossdock client as a jar (its classes are a directory here), shipped with each job as
   * -libjars would. MiniMRYarnCluster also gives its containers the test JVM's class path, so
   * this test cannot catch a jar missing from a real cluster's tasks.
   */
  private static String clientJar;

  @TempDir Path dir;

  @BeforeAll
  static void start() throws Exception {
    server = CrossdockServer.start();
    Configuration c = new Configuration();
    c.setBoolean("yarn.nodemanager.vmem-check-enabled", false);
    c.setBoolean("yarn.nodemanager.pmem-check-enabled", false);
    c.set("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage",
        "99.9");
    // The application master and the tasks run on this Java 17 too.
    c.set("yarn.app.mapreduce.am.command-opts", "-Xmx400m " + OPENS);
    c.set("mapreduce.map.java.opts", "-Xmx300m " + OPENS);
    c.set("mapreduce.reduce.java.opts", "-Xmx300m " + OPENS);
    c.setInt("yarn.app.mapreduce.am.resource.mb", 512);
    c.setInt("mapreduce.map.memory.mb", 512);
    c.setInt("mapreduce.reduce.memory.mb", 512);
    yarn = new MiniMRYarnCluster("crossdock", 1);
    yarn.init(c);
    yarn.start();
    clientJar = JarFinder.getJar(CrossdockMapOutputCollector.class);
  }

  @AfterAll
  static void stop() throws Exception {
    if (yarn != null) {
      yarn.stop();
    }
    if (server != null) {
      server.close();
    }
  }

  private Configuration onYarn() {
    Configuration c = new Configuration(yarn.getConfig());
    c.set("tmpjars", Path.of(clientJar).toUri().toString()); // -libjars
    c.setInt("mapreduce.map.maxattempts", 1);
    c.setInt("mapreduce.reduce.maxattempts", 1);
    return c;
  }

  private Path words() throws Exception {
    Path in = Files.createDirectories(dir.resolve("words"));
    Random r = new Random(3);
    for (int f = 0; f < 2; f++) {
      List<String> lines = new ArrayList<>();
      for (int i = 0; i < 3000; i++) {
        lines.add("w" + Integer.toString(r.nextInt(800), 36) + " w"
            + Integer.toString(r.nextInt(50), 36));
      }
      Files.write(in.resolve("part" + f + ".txt"), lines);
    }
    return in;
  }

  @Test
  void aJobSubmittedAsCrossdockYarnEqualsMapReducesOwnShuffle() throws Exception {
    Path in = words();
    Job vanilla = MapReduceJobs.wordCount(onYarn(), in, dir.resolve("vanilla"), 2);
    assertTrue(vanilla.isSuccessful(), "vanilla WordCount on YARN failed");
    Configuration c = MapReduceJobs.crossdock(onYarn(), server.addr());
    c.set("mapreduce.framework.name", CrossdockClientProtocolProvider.FRAMEWORK);
    // The submitter looks at the job every quarter lease (15 s). The lease outlasts the
    // 30 s wait below after the job's end, so only an unregistration can pass it, and a
    // stalled renewal on a loaded machine cannot expire the app mid-job.
    c.set("crossdock.app.lease", "60s");
    Job cd = MapReduceJobs.wordCount(c, in, dir.resolve("crossdock"), 2);
    assertTrue(cd.isSuccessful(), "WordCount through Crossdock on YARN failed: "
        + cd.getStatus().getFailureInfo());
    List<Path> expected = MapReduceJobs.parts(dir.resolve("vanilla"));
    List<Path> got = MapReduceJobs.parts(dir.resolve("crossdock"));
    assertEquals(2, got.size());
    for (int i = 0; i < expected.size(); i++) {
      assertArrayEquals(Files.readAllBytes(expected.get(i)), Files.readAllBytes(got.get(i)));
    }
    assertEquals(2 * 2, MapReduceJobs.counter(cd, TaskCounter.MERGED_MAP_OUTPUTS));
    assertEquals(0, MapReduceJobs.counter(cd, TaskCounter.SPILLED_RECORDS));

    // The submitter registered the job (its app is in the job's credentials) and unregisters
    // it once YARN says the job ended; the job client was closed first, as drivers do.
    cd.close();
    String app = new String(cd.getCredentials().getSecretKey(JobRegistration.APP_ID),
        StandardCharsets.UTF_8);
    byte[] token = cd.getCredentials().getSecretKey(JobRegistration.APP_TOKEN);
    assertTrue(app.startsWith(cd.getJobID().toString() + "-"), app);
    long deadline = System.nanoTime() + 30_000_000_000L;
    CrossdockException gone = null;
    try (CoordinatorClient coord = new CoordinatorClient(server.addr(), 3000, 5000, app, token)) {
      while (gone == null && System.nanoTime() < deadline) {
        try {
          coord.shuffleStatus(app, 0);
          Thread.sleep(200);
        } catch (CrossdockException e) {
          gone = e;
        }
      }
    }
    assertTrue(gone != null && gone.code() == ErrorCode.UNKNOWN_APP,
        "the app was not unregistered after the job ended: " + gone);
  }

  @Test
  void aYarnJobNotSubmittedThroughCrossdockFailsAndSaysHowToSubmitIt() throws Exception {
    Configuration c = MapReduceJobs.crossdock(onYarn(), server.addr()); // framework: yarn
    Job job = MapReduceJobs.wordCount(c, words(), dir.resolve("out"), 1);
    assertFalse(job.isSuccessful());
    StringBuilder why = new StringBuilder();
    for (TaskCompletionEvent e : job.getTaskCompletionEvents(0, 100)) {
      for (String d : job.getTaskDiagnostics(e.getTaskAttemptId())) {
        why.append(d).append('\n');
      }
    }
    assertTrue(why.toString().contains("mapreduce.framework.name=crossdock-yarn"), why.toString());
  }
}
