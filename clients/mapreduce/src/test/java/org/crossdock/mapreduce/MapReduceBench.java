package org.crossdock.mapreduce;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.Job;
import org.crossdock.client.CrossdockServer;

/**
 * The MapReduce demo and benchmark ({@code make demo-mapreduce}, {@code make bench-mapreduce}):
 * TeraGen, then TeraSort through MapReduce's own shuffle and through a real {@code crossdock
 * standalone}, alternating, {@code --runs} times; every Crossdock output compared byte for byte
 * with MapReduce's and checked by TeraValidate; then WordCount both ways, compared. Prints the
 * median wall times, their ratio and the counters that show where records were spilled; exits 1
 * if any output differs or does not validate.
 *
 * <p>Reduce-side spilled records: Crossdock's reduces have no disk path (the job's Spilled
 * Records are its maps' spills only); MapReduce's are its job's Spilled Records minus its maps'
 * output records, which holds when each of its maps spills once, which the run checks (a split
 * of at most {@code --split-mb} fits the 100 MB sort buffer).
 */
public final class MapReduceBench {
  private MapReduceBench() {}

  public static void main(String[] args) throws Exception {
    long rows = 2_000_000;
    int runs = 1;
    int warmup = 0;
    int reduces = 4;
    int splitMb = 32;
    long wordLines = 200_000;
    String memory = "1GiB";
    Path json = null;
    for (int i = 0; i < args.length; i++) {
      String v = i + 1 < args.length ? args[i + 1] : "";
      switch (args[i]) {
        case "--rows" -> { rows = Long.parseLong(v); i++; }
        case "--runs" -> { runs = Integer.parseInt(v); i++; }
        case "--warmup" -> { warmup = Integer.parseInt(v); i++; }
        case "--reduces" -> { reduces = Integer.parseInt(v); i++; }
        case "--split-mb" -> { splitMb = Integer.parseInt(v); i++; }
        case "--word-lines" -> { wordLines = Long.parseLong(v); i++; }
        case "--worker-memory" -> { memory = v; i++; }
        case "--json" -> { json = Path.of(v); i++; }
        default -> throw new IllegalArgumentException("unknown argument " + args[i]
            + " (--rows N --runs N --warmup N --reduces N --split-mb N --word-lines N --worker-memory SIZE"
            + " --json PATH)");
      }
    }
    if (splitMb > 64) {
      throw new IllegalArgumentException("--split-mb above 64 would make MapReduce's maps spill"
          + " more than once, and its reduce-side spill count inexact");
    }
    Path work = Files.createTempDirectory("crossdock-mapreduce-bench");
    boolean ok = true;
    try (CrossdockServer server = CrossdockServer.startWithMemory(memory)) {
      Configuration local = MapReduceJobs.local(work);
      Configuration cd = MapReduceJobs.crossdock(local, server.addr());
      Path gen = work.resolve("teragen");
      System.out.printf("TeraGen: %,d rows (%,d MB)%n", rows, rows * 100 / 1_000_000);
      MapReduceJobs.teraGen(local, rows, gen);
      long inputBytes = 0;
      for (Path p : MapReduceJobs.parts(gen)) {
        inputBytes += Files.size(p);
      }
      int maps = (int) Math.max(1, (inputBytes + (splitMb << 20) - 1) / ((long) splitMb << 20));

      // Warm-up pairs, not counted: the first job of a JVM pays class loading and JIT, and the
      // first read of the input a cold page cache.
      for (int w = 0; w < warmup; w++) {
        for (boolean crossdock : new boolean[] {false, true}) {
          Path out = work.resolve("warmup-" + crossdock + "-" + w);
          long t0 = System.nanoTime();
          MapReduceJobs.teraSort(crossdock ? cd : local, gen, out, maps, reduces);
          System.out.printf("warm-up %-9s TeraSort: %.2f s (not counted)%n",
              crossdock ? "crossdock" : "vanilla", (System.nanoTime() - t0) / 1e9);
          deleteTree(out);
        }
      }
      List<Double> vanillaSecs = new ArrayList<>();
      List<Double> cdSecs = new ArrayList<>();
      Map<String, Long> vanillaCounters = null;
      Map<String, Long> cdCounters = null;
      for (int run = 0; run < runs; run++) {
        for (boolean crossdock : run % 2 == 0 ? new boolean[] {false, true}
            : new boolean[] {true, false}) {
          Path out = work.resolve((crossdock ? "crossdock-" : "vanilla-") + run);
          long t0 = System.nanoTime();
          Map<String, Long> c = MapReduceJobs.teraSort(crossdock ? cd : local, gen, out, maps,
              reduces);
          double secs = (System.nanoTime() - t0) / 1e9;
          (crossdock ? cdSecs : vanillaSecs).add(secs);
          if (crossdock) {
            cdCounters = c;
          } else {
            vanillaCounters = c;
          }
          System.out.printf("run %d %-9s TeraSort %,d maps × %d reduces: %.2f s%n", run + 1,
              crossdock ? "crossdock" : "vanilla", maps, reduces, secs);
        }
        Path v = work.resolve("vanilla-" + run);
        Path x = work.resolve("crossdock-" + run);
        if (!sameOutput(v, x)) {
          System.out.println("FAIL: run " + (run + 1) + ": Crossdock's TeraSort output differs"
              + " from MapReduce's");
          ok = false;
        }
        List<String> report = MapReduceJobs.teraValidate(local, x, work.resolve("validate-" + run));
        if (report.stream().anyMatch(l -> l.startsWith("error"))
            || report.stream().noneMatch(l -> l.startsWith("checksum"))) {
          System.out.println("FAIL: TeraValidate of run " + (run + 1) + ": " + report);
          ok = false;
        }
        deleteTree(v);
        deleteTree(x);
      }

      Path words = work.resolve("words");
      writeWords(words, wordLines);
      Job wv = MapReduceJobs.wordCount(local, words, work.resolve("wc-vanilla"), reduces);
      Job wc = MapReduceJobs.wordCount(cd, words, work.resolve("wc-crossdock"), reduces);
      boolean wordsOk = wv.isSuccessful() && wc.isSuccessful()
          && sameOutput(work.resolve("wc-vanilla"), work.resolve("wc-crossdock"));
      if (!wordsOk) {
        System.out.println("FAIL: WordCount through Crossdock differs from MapReduce's own");
        ok = false;
      }

      long vanillaMapSpill = vanillaCounters.get("Map output records");
      long vanillaReduceSpill = vanillaCounters.get("Spilled Records") - vanillaMapSpill;
      double vm = median(vanillaSecs);
      double cm = median(cdSecs);
      System.out.println();
      System.out.printf("TeraSort %,d MB, %d maps × %d reduces, local job runner, %d run(s):%n",
          inputBytes / 1_000_000, maps, reduces, runs);
      System.out.printf("  %-34s %12s %12s%n", "", "MapReduce", "Crossdock");
      System.out.printf("  %-34s %12.2f %12.2f   ratio %.2f%n", "wall time, median (s)", vm, cm,
          cm / vm);
      System.out.printf("  %-34s %,12d %,12d%n", "Spilled Records (job)",
          vanillaCounters.get("Spilled Records"), cdCounters.get("Spilled Records"));
      System.out.printf("  %-34s %,12d %,12d%n", "reduce-side spilled records",
          vanillaReduceSpill, 0L);
      System.out.printf("  %-34s %,12d %,12d%n", "Merged Map outputs",
          vanillaCounters.get("Merged Map outputs"), cdCounters.get("Merged Map outputs"));
      System.out.printf("  %-34s %,12d %,12d%n", "Reduce shuffle bytes",
          vanillaCounters.get("Reduce shuffle bytes"), cdCounters.get("Reduce shuffle bytes"));
      System.out.printf("  %-34s %,12d %,12d%n", "GC time (ms)",
          vanillaCounters.getOrDefault("GC time elapsed (ms)", 0L),
          cdCounters.getOrDefault("GC time elapsed (ms)", 0L));
      System.out.printf("WordCount (%,d lines, combiner on): outputs %s%n", wordLines,
          wordsOk ? "equal" : "DIFFER");
      System.out.println(ok ? "OK: every output equal to MapReduce's own shuffle's and valid"
          : "FAILED");
      if (json != null) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rows", rows);
        out.put("input_bytes", inputBytes);
        out.put("maps", maps);
        out.put("reduces", reduces);
        out.put("runs", runs);
        out.put("warmup_pairs", warmup);
        out.put("vanilla_secs", vanillaSecs);
        out.put("crossdock_secs", cdSecs);
        out.put("ratio_median", cm / vm);
        out.put("vanilla_counters", vanillaCounters);
        out.put("crossdock_counters", cdCounters);
        out.put("vanilla_reduce_spilled_records", vanillaReduceSpill);
        out.put("outputs_equal", ok);
        Files.writeString(json, toJson(out));
      }
    } finally {
      deleteTree(work);
    }
    System.exit(ok ? 0 : 1);
  }

  private static boolean sameOutput(Path a, Path b) throws Exception {
    List<Path> x = MapReduceJobs.parts(a);
    List<Path> y = MapReduceJobs.parts(b);
    if (x.size() != y.size()) {
      return false;
    }
    for (int i = 0; i < x.size(); i++) {
      if (Files.mismatch(x.get(i), y.get(i)) != -1) {
        return false;
      }
    }
    return true;
  }

  private static void writeWords(Path dir, long lines) throws Exception {
    Files.createDirectories(dir);
    Random r = new Random(1);
    try (var w = Files.newBufferedWriter(dir.resolve("words.txt"))) {
      for (long i = 0; i < lines; i++) {
        for (int j = 0; j < 10; j++) {
          int rank = (int) Math.floor(Math.pow(r.nextDouble(), 3) * 50_000);
          w.write(j == 0 ? "" : " ");
          w.write("w" + Integer.toString(rank, 36));
        }
        w.newLine();
      }
    }
  }

  private static double median(List<Double> xs) {
    double[] s = xs.stream().mapToDouble(Double::doubleValue).sorted().toArray();
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  private static void deleteTree(Path p) throws Exception {
    if (!Files.exists(p)) {
      return;
    }
    try (Stream<Path> s = Files.walk(p)) {
      for (Path q : s.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(q);
      }
    }
  }

  /** A small JSON writer for the result (numbers, strings, lists and maps of them). */
  private static String toJson(Object o) {
    if (o instanceof Map<?, ?> m) {
      StringBuilder b = new StringBuilder("{");
      for (var e : m.entrySet()) {
        b.append(b.length() > 1 ? ", " : "").append(toJson(e.getKey().toString())).append(": ")
            .append(toJson(e.getValue()));
      }
      return b.append("}").toString();
    }
    if (o instanceof List<?> l) {
      return l.stream().map(MapReduceBench::toJson).reduce((a, c) -> a + ", " + c)
          .map(s -> "[" + s + "]").orElse("[]");
    }
    if (o instanceof String s) {
      return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }
    return String.valueOf(o);
  }
}
