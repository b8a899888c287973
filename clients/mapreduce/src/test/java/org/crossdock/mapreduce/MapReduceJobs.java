package org.crossdock.mapreduce;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.examples.WordCount;
import org.apache.hadoop.examples.terasort.TeraGen;
import org.apache.hadoop.examples.terasort.TeraSort;
import org.apache.hadoop.examples.terasort.TeraValidate;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.TaskCounter;
import org.apache.hadoop.mapreduce.lib.input.FileInputFormat;
import org.apache.hadoop.mapreduce.lib.output.FileOutputFormat;
import org.apache.hadoop.util.Tool;
import org.apache.hadoop.util.ToolRunner;

/**
 * Real MapReduce jobs from hadoop-mapreduce-examples in the local job runner, through
 * MapReduce's own shuffle or through Crossdock (the job properties below are all it takes):
 * the tests, the demo and the benchmark run them.
 */
final class MapReduceJobs {
  private MapReduceJobs() {}

  /** A local job runner configuration whose files all live under {@code work}. */
  static Configuration local(Path work) {
    Configuration c = new Configuration();
    c.set("fs.defaultFS", "file:///");
    c.set("mapreduce.framework.name", "local");
    c.set("hadoop.tmp.dir", work.resolve("tmp").toString());
    c.set("mapreduce.cluster.local.dir", work.resolve("local").toString());
    c.set("mapreduce.jobtracker.staging.root.dir", work.resolve("staging").toString());
    // Two maps and two reduces at a time, as two task slots would run them.
    c.setInt("mapreduce.local.map.tasks.maximum", 2);
    c.setInt("mapreduce.local.reduce.tasks.maximum", 2);
    // The job client looks at a running job once a second by default, which rounds every
    // job's time up to the next second: 50 ms keeps the benchmark's times exact.
    c.setInt("mapreduce.client.progressmonitor.pollinterval", 50);
    c.setInt("mapreduce.client.completion.pollinterval", 50);
    return c;
  }

  /** {@code base} with its shuffle through Crossdock at {@code coordinator}. */
  static Configuration crossdock(Configuration base, String coordinator) {
    Configuration c = new Configuration(base);
    c.set("mapreduce.job.map.output.collector.class", CrossdockMapOutputCollector.class.getName());
    c.set("mapreduce.job.reduce.shuffle.consumer.plugin.class",
        CrossdockShuffleConsumer.class.getName());
    c.set("crossdock.coordinator", coordinator);
    return c;
  }

  /** Runs {@code tool}, returns the counters of its (last) job; fails if it does. */
  static Map<String, Long> runTool(Configuration conf, Tool tool, String... args) throws Exception {
    try (JobLog log = new JobLog()) {
      int rc = ToolRunner.run(new Configuration(conf), tool, args);
      if (rc != 0) {
        throw new IllegalStateException(tool.getClass().getSimpleName() + " "
            + String.join(" ", args) + " failed with exit code " + rc + ": " + log.failures());
      }
      return log.counters();
    }
  }

  /**
   * TeraGen's {@code rows} rows of 100 bytes into {@code out}. The local job runner runs it as
   * one map whatever the job asks (its client sets mapreduce.job.maps to 1), so it writes one
   * file; {@link #teraSort} cuts it into as many maps as asked.
   */
  static Map<String, Long> teraGen(Configuration conf, long rows, Path out) throws Exception {
    return runTool(conf, new TeraGen(), Long.toString(rows), out.toUri().toString());
  }

  /** TeraSort of {@code in} into {@code out} with {@code maps} maps and {@code reduces} reduces. */
  static Map<String, Long> teraSort(Configuration conf, Path in, Path out, int maps, int reduces)
      throws Exception {
    long bytes = 0;
    for (Path p : parts(in)) {
      bytes += Files.size(p);
    }
    Configuration c = new Configuration(conf);
    c.setInt("mapreduce.job.reduces", reduces);
    c.setLong("mapreduce.input.fileinputformat.split.maxsize", (bytes + maps - 1) / maps);
    return runTool(c, new TeraSort(), in.toUri().toString(), out.toUri().toString());
  }

  /** TeraValidate's report: a checksum line, and an error line per problem found. */
  static List<String> teraValidate(Configuration conf, Path sorted, Path report) throws Exception {
    runTool(conf, new TeraValidate(), sorted.toUri().toString(), report.toUri().toString());
    return Files.readAllLines(report.resolve("part-r-00000"));
  }

  /**
   * WordCount as the examples' main sets it up (their mapper, their reducer also as the
   * combiner), with {@code reduces} reduces; returns the job's counters.
   */
  static Job wordCount(Configuration conf, Path in, Path out, int reduces) throws Exception {
    Job job = Job.getInstance(new Configuration(conf), "word count");
    job.setJarByClass(WordCount.class);
    job.setMapperClass(WordCount.TokenizerMapper.class);
    job.setCombinerClass(WordCount.IntSumReducer.class);
    job.setReducerClass(WordCount.IntSumReducer.class);
    job.setOutputKeyClass(Text.class);
    job.setOutputValueClass(IntWritable.class);
    job.setNumReduceTasks(reduces);
    FileInputFormat.addInputPath(job, new org.apache.hadoop.fs.Path(in.toUri()));
    FileOutputFormat.setOutputPath(job, new org.apache.hadoop.fs.Path(out.toUri()));
    job.waitForCompletion(false);
    return job;
  }

  static long counter(Job job, TaskCounter c) throws IOException {
    return job.getCounters().findCounter(c).getValue();
  }

  /** The job's output files ({@code part-*}) in name order. */
  static List<Path> parts(Path dir) throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      return s.filter(p -> p.getFileName().toString().startsWith("part-")).sorted().toList();
    }
  }

  /** The bytes of every output file, one after another in name order. */
  static byte[] output(Path dir) throws IOException {
    ByteArrayOutputStream all = new ByteArrayOutputStream();
    for (Path p : parts(dir)) {
      all.write(Files.readAllBytes(p));
    }
    return all.toByteArray();
  }
}
