package org.crossdock.mapreduce;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.TaskCounter;
import org.crossdock.client.CrossdockServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * MapReduce jobs from hadoop-mapreduce-examples, in the local job runner, through a real
 * {@code crossdock standalone} and through MapReduce's own shuffle: outputs equal byte for byte,
 * the counters show one merge of every map's run and no spill on the reduce side.
 */
@Timeout(600)
class MapReduceJobsTest {
  private static CrossdockServer server;

  @TempDir Path dir;

  @BeforeAll
  static void start() throws Exception {
    server = CrossdockServer.start();
  }

  @AfterAll
  static void stop() throws Exception {
    if (server != null) {
      server.close();
    }
  }

  /** Text files of words drawn from a small skewed vocabulary (many equal keys). */
  private static Path words(Path dir, int files, int lines) throws Exception {
    Path in = Files.createDirectories(dir.resolve("words"));
    Random r = new Random(42);
    for (int f = 0; f < files; f++) {
      List<String> out = new ArrayList<>();
      for (int i = 0; i < lines; i++) {
        StringBuilder line = new StringBuilder();
        for (int w = 0; w < 12; w++) {
          int rank = (int) Math.floor(Math.pow(r.nextDouble(), 3) * 2000);
          line.append(w == 0 ? "" : " ").append("w").append(Integer.toString(rank, 36));
        }
        out.add(line.toString());
      }
      Files.write(in.resolve("part" + f + ".txt"), out);
    }
    return in;
  }

  @Test
  void wordCountThroughCrossdockEqualsMapReducesOwnShuffle() throws Exception {
    Configuration local = MapReduceJobs.local(dir);
    Path in = words(dir, 3, 4000);
    Job vanilla = MapReduceJobs.wordCount(local, in, dir.resolve("vanilla"), 3);
    assertTrue(vanilla.isSuccessful(), "vanilla WordCount failed");
    Job cd = MapReduceJobs.wordCount(MapReduceJobs.crossdock(local, server.addr()), in,
        dir.resolve("crossdock"), 3);
    assertTrue(cd.isSuccessful(), "WordCount through Crossdock failed: "
        + cd.getStatus().getFailureInfo());

    List<Path> expected = MapReduceJobs.parts(dir.resolve("vanilla"));
    List<Path> got = MapReduceJobs.parts(dir.resolve("crossdock"));
    assertEquals(3, got.size());
    for (int i = 0; i < expected.size(); i++) {
      assertArrayEquals(Files.readAllBytes(expected.get(i)), Files.readAllBytes(got.get(i)),
          got.get(i) + " differs from MapReduce's own shuffle's output");
    }
    // The combiner ran on the maps (fewer records than the maps' output reached the reduces),
    // every map's run of every partition was merged once, and nothing spilled anywhere.
    assertEquals(MapReduceJobs.counter(vanilla, TaskCounter.COMBINE_OUTPUT_RECORDS),
        MapReduceJobs.counter(cd, TaskCounter.COMBINE_OUTPUT_RECORDS));
    assertEquals(MapReduceJobs.counter(cd, TaskCounter.COMBINE_OUTPUT_RECORDS),
        MapReduceJobs.counter(cd, TaskCounter.REDUCE_INPUT_RECORDS));
    assertTrue(MapReduceJobs.counter(cd, TaskCounter.REDUCE_INPUT_RECORDS)
        < MapReduceJobs.counter(cd, TaskCounter.MAP_OUTPUT_RECORDS));
    assertEquals(3 * 3, MapReduceJobs.counter(cd, TaskCounter.MERGED_MAP_OUTPUTS));
    assertEquals(0, MapReduceJobs.counter(cd, TaskCounter.SPILLED_RECORDS));
    assertTrue(MapReduceJobs.counter(vanilla, TaskCounter.SPILLED_RECORDS) > 0);
    assertEquals(MapReduceJobs.counter(cd, TaskCounter.MAP_OUTPUT_MATERIALIZED_BYTES),
        MapReduceJobs.counter(cd, TaskCounter.REDUCE_SHUFFLE_BYTES));
  }

  /**
   * Each codec a job may name: batches of 1 KiB, so that every run is many batches and each
   * reduce's decompression buffers are reused from batch to batch while the merge crosses them.
   * (Lz4Codec needs lz4-java, which hadoop-client leaves off the class path: MapReduce's own
   * shuffle fails with it here too.)
   */
  @ParameterizedTest
  @ValueSource(strings = {"DefaultCodec", "GzipCodec", "BZip2Codec", "SnappyCodec"})
  void compressedMapOutputsTravelCompressedAndReadBackEqual(String codec) throws Exception {
    Configuration local = MapReduceJobs.local(dir);
    Path in = words(dir, 2, 4000);
    Configuration compress = new Configuration(local);
    compress.setBoolean("mapreduce.map.output.compress", true);
    compress.set("mapreduce.map.output.compress.codec", "org.apache.hadoop.io.compress." + codec);
    Job vanilla = MapReduceJobs.wordCount(compress, in, dir.resolve("vanilla"), 2);
    assertTrue(vanilla.isSuccessful(), "vanilla WordCount failed");
    Configuration plainConf = MapReduceJobs.crossdock(local, server.addr());
    plainConf.set("crossdock.push.batchSize", "1k");
    Configuration cdConf = MapReduceJobs.crossdock(compress, server.addr());
    cdConf.set("crossdock.push.batchSize", "1k");
    Job plain = MapReduceJobs.wordCount(plainConf, in, dir.resolve("plain"), 2);
    Job cd = MapReduceJobs.wordCount(cdConf, in, dir.resolve("crossdock"), 2);
    assertTrue(plain.isSuccessful(), "WordCount through Crossdock failed: "
        + plain.getStatus().getFailureInfo());
    assertTrue(cd.isSuccessful(), "WordCount through Crossdock with " + codec + " failed: "
        + cd.getStatus().getFailureInfo());

    List<Path> expected = MapReduceJobs.parts(dir.resolve("vanilla"));
    List<Path> got = MapReduceJobs.parts(dir.resolve("crossdock"));
    assertEquals(expected.size(), got.size());
    assertEquals(2, got.size());
    for (int i = 0; i < expected.size(); i++) {
      assertArrayEquals(Files.readAllBytes(expected.get(i)), Files.readAllBytes(got.get(i)),
          got.get(i) + " differs from MapReduce's own shuffle's output");
    }
    // It went through Crossdock (every map's run merged once, nothing spilled), the same
    // records in fewer bytes: what the maps pushed is what the reduces fetched, and much less
    // than the same job pushes uncompressed.
    assertEquals(2 * 2, MapReduceJobs.counter(cd, TaskCounter.MERGED_MAP_OUTPUTS));
    assertEquals(0, MapReduceJobs.counter(cd, TaskCounter.SPILLED_RECORDS));
    assertEquals(MapReduceJobs.counter(plain, TaskCounter.REDUCE_INPUT_RECORDS),
        MapReduceJobs.counter(cd, TaskCounter.REDUCE_INPUT_RECORDS));
    long compressed = MapReduceJobs.counter(cd, TaskCounter.MAP_OUTPUT_MATERIALIZED_BYTES);
    long uncompressed = MapReduceJobs.counter(plain, TaskCounter.MAP_OUTPUT_MATERIALIZED_BYTES);
    assertEquals(compressed, MapReduceJobs.counter(cd, TaskCounter.REDUCE_SHUFFLE_BYTES));
    assertTrue(uncompressed > 20 * 1024, uncompressed + " bytes: many 1 KiB batches per run");
    assertTrue(compressed > 0 && compressed < uncompressed * 3 / 4, compressed
        + " compressed against " + uncompressed + " bytes uncompressed");
  }

  @Test
  void teraSortThroughCrossdockEqualsMapReducesOwnShuffleAndValidates() throws Exception {
    Configuration local = MapReduceJobs.local(dir);
    Path gen = dir.resolve("teragen");
    MapReduceJobs.teraGen(local, 100_000, gen);
    Map<String, Long> vanilla = MapReduceJobs.teraSort(local, gen, dir.resolve("vanilla"), 4, 3);
    Map<String, Long> cd = MapReduceJobs.teraSort(MapReduceJobs.crossdock(local, server.addr()),
        gen, dir.resolve("crossdock"), 4, 3);

    assertArrayEquals(MapReduceJobs.output(dir.resolve("vanilla")),
        MapReduceJobs.output(dir.resolve("crossdock")), "TeraSort's outputs differ");
    assertEquals(3, MapReduceJobs.parts(dir.resolve("crossdock")).size());
    List<String> report = MapReduceJobs.teraValidate(local, dir.resolve("crossdock"),
        dir.resolve("validate"));
    assertFalse(report.stream().anyMatch(l -> l.startsWith("error")), "TeraValidate: " + report);
    assertTrue(report.stream().anyMatch(l -> l.startsWith("checksum")), "TeraValidate: " + report);

    assertEquals(100_000L, cd.get("Reduce input records"), cd.toString());
    assertEquals(4L * 3, cd.get("Merged Map outputs"), cd.toString());
    assertEquals(0L, cd.get("Spilled Records"), cd.toString());
    assertTrue(vanilla.get("Spilled Records") >= 100_000L, vanilla.toString());
    assertEquals(cd.get("Map output materialized bytes"), cd.get("Reduce shuffle bytes"));
  }

  /**
   * Maps whose records outgrow their 1 MiB sort buffer: 40,000 TeraGen records per map, each 102
   * serialized bytes and 20 bytes of index in the buffer, so a map holds 8,595 records when the
   * buffer passes 1 MiB and spills four times, ending with 5,620. Pushed as runs (the default),
   * its first three spills are runs of their own; the fourth (8,595 records) and the rest (5,620)
   * go to disk and are merged into its last run: each reduce merges 2 maps x 4 runs. With spills
   * to disk ({@code crossdock.map.spillRuns=false}) every record is spilled once and each map
   * pushes one merged run per partition. Both outputs equal MapReduce's own.
   */
  @Test
  void mapsThatOutgrowTheirSortBufferPushEachSpillAsARunOrMergeOnDisk() throws Exception {
    Configuration local = MapReduceJobs.local(dir);
    Path gen = dir.resolve("teragen");
    MapReduceJobs.teraGen(local, 80_000, gen); // 4 MB per map, 1 MB buffers
    Configuration small = new Configuration(local);
    small.setInt("mapreduce.task.io.sort.mb", 1);
    // A fetch limit of 1 MiB: the reduces read each run in several segments.
    small.set("crossdock.fetch.maxInFlight", "1m");
    MapReduceJobs.teraSort(local, gen, dir.resolve("vanilla"), 2, 2);
    Map<String, Long> runs = MapReduceJobs.teraSort(MapReduceJobs.crossdock(small, server.addr()),
        gen, dir.resolve("runs"), 2, 2);
    Configuration onDisk = new Configuration(small);
    onDisk.setBoolean("crossdock.map.spillRuns", false);
    Map<String, Long> merged = MapReduceJobs.teraSort(
        MapReduceJobs.crossdock(onDisk, server.addr()), gen, dir.resolve("merged"), 2, 2);

    byte[] want = MapReduceJobs.output(dir.resolve("vanilla"));
    assertArrayEquals(want, MapReduceJobs.output(dir.resolve("runs")), "spills pushed as runs");
    assertArrayEquals(want, MapReduceJobs.output(dir.resolve("merged")), "spills merged on disk");
    assertEquals(2L * (8_595 + 5_620), runs.get("Spilled Records"), "past 3 runs, to disk: " + runs);
    assertEquals(2L * 2 * 4, runs.get("Merged Map outputs"), runs.toString());
    assertEquals(80_000L, runs.get("Reduce input records"), runs.toString());
    assertEquals(runs.get("Map output materialized bytes"), runs.get("Reduce shuffle bytes"));
    // Every record went through a map-side spill (several per map), none through the reduce's.
    assertEquals(80_000L, merged.get("Spilled Records"), merged.toString());
    assertEquals(2L * 2, merged.get("Merged Map outputs"), merged.toString());
    assertEquals(80_000L, merged.get("Reduce input records"), merged.toString());
  }

  @Test
  void aJobWithoutACoordinatorFailsAndSaysWhatIsMissing() throws Exception {
    Configuration c = MapReduceJobs.crossdock(MapReduceJobs.local(dir), "");
    c.unset("crossdock.coordinator");
    try (JobLog log = new JobLog()) {
      Job job = MapReduceJobs.wordCount(c, words(dir, 1, 10), dir.resolve("out"), 1);
      assertFalse(job.isSuccessful());
      assertTrue(log.failures().stream().anyMatch(f -> f.contains(
          "crossdock.coordinator is not set: the host:port of the Crossdock coordinator")),
          log.failures().toString());
    }
  }
}
