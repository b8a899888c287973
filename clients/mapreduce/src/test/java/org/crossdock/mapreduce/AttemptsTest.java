package org.crossdock.mapreduce;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapred.Counters;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.JobID;
import org.apache.hadoop.mapred.MapOutputCollector;
import org.apache.hadoop.mapred.MapTask;
import org.apache.hadoop.mapred.RawKeyValueIterator;
import org.apache.hadoop.mapred.Reporter;
import org.apache.hadoop.mapred.ShuffleConsumerPlugin;
import org.apache.hadoop.mapred.Task;
import org.apache.hadoop.mapred.TaskAttemptID;
import org.apache.hadoop.mapred.TaskPhases;
import org.apache.hadoop.mapred.TaskStatus;
import org.apache.hadoop.mapreduce.TaskCounter;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.split.JobSplit;
import org.apache.hadoop.util.Progress;
import org.crossdock.client.CrossdockServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The attempts MapReduce makes of a task, which the local job runner never makes (it does not
 * retry): two attempts of a map (a retry or a speculative copy) with different outputs, and a
 * reduce attempt that fails half-way and is retried. The collector and the plug-in are driven
 * as MapTask and ReduceTask drive them, against a real {@code crossdock standalone}.
 */
@Timeout(120)
class AttemptsTest {
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

  private JobConf job(int maps, int reduces) {
    JobConf job = new JobConf(MapReduceJobs.crossdock(MapReduceJobs.local(dir), server.addr()));
    job.setNumMapTasks(maps);
    job.setNumReduceTasks(reduces);
    job.setMapOutputKeyClass(Text.class);
    job.setMapOutputValueClass(Text.class);
    return job;
  }

  /** Runs attempt {@code attempt} of map {@code map}: its records, pushed and committed. */
  private static void runMap(JobConf job, JobID id, int map, int attempt, String tag)
      throws Exception {
    runMap(job, id, map, attempt, tag, 1000, true);
  }

  /**
   * Runs an attempt that collects {@code records} records and then, as MapTask does, flushes
   * and closes its output: after entering the sort phase if the mapper {@code succeeded}, in
   * the map phase if it threw (a new-API mapper's output is flushed in both cases).
   */
  private static void runMap(JobConf job, JobID id, int map, int attempt, String tag,
      int records, boolean succeeded) throws Exception {
    TaskAttemptID a = new TaskAttemptID(new org.apache.hadoop.mapred.TaskID(id, TaskType.MAP, map),
        attempt);
    MapTask task = new MapTask("", a, map, new JobSplit.TaskSplitIndex(), 1);
    task.setConf(job);
    Task.TaskReporter reporter = task.new TaskReporter(task.getProgress(), null);
    CrossdockMapOutputCollector<Text, Text> c = new CrossdockMapOutputCollector<>();
    c.init(new MapOutputCollector.Context(task, job, reporter));
    try {
      for (int i = 0; i < records; i++) {
        c.collect(new Text(String.format("k%04d", (i * 7919) % 1000)), new Text(tag + map),
            i % job.getNumReduceTasks());
      }
      if (succeeded) {
        TaskPhases.set(task, TaskStatus.Phase.SORT);
      }
      c.flush();
    } finally {
      c.close();
    }
  }

  /** Reads reduce {@code reduce}'s merged input, at most {@code limit} records; keys and values. */
  private static List<String> runReduce(JobConf job, JobID id, int reduce, int attempt, int limit)
      throws Exception {
    TaskAttemptID a = new TaskAttemptID(
        new org.apache.hadoop.mapred.TaskID(id, TaskType.REDUCE, reduce), attempt);
    Counters counters = new Counters();
    ShuffleConsumerPlugin.Context<Text, Text> ctx = new ShuffleConsumerPlugin.Context<>(a, job,
        null, null, null, Reporter.NULL, null, null, null,
        counters.findCounter(TaskCounter.SPILLED_RECORDS),
        counters.findCounter(TaskCounter.COMBINE_INPUT_RECORDS),
        counters.findCounter(TaskCounter.SHUFFLED_MAPS),
        counters.findCounter(TaskCounter.REDUCE_SHUFFLE_BYTES),
        counters.findCounter(TaskCounter.FAILED_SHUFFLE),
        counters.findCounter(TaskCounter.MERGED_MAP_OUTPUTS), null, new Progress(),
        new Progress(), null, null, null);
    CrossdockShuffleConsumer<Text, Text> plugin = new CrossdockShuffleConsumer<>();
    plugin.init(ctx);
    List<String> out = new ArrayList<>();
    RawKeyValueIterator it = plugin.run();
    try {
      while (out.size() < limit && it.next()) {
        Text k = new Text();
        k.readFields(it.getKey());
        Text v = new Text();
        v.readFields(it.getValue());
        out.add(k + "=" + v);
      }
    } finally {
      plugin.close();
    }
    return out;
  }

  @Test
  void ofTwoAttemptsOfAMapOnlyTheFirstToCommitIsRead() throws Exception {
    JobConf job = job(2, 2);
    JobID id = new JobID("attempts", 1);
    runMap(job, id, 0, 0, "first");
    runMap(job, id, 0, 1, "second"); // a speculative copy finishing later: returns normally
    runMap(job, id, 1, 0, "first");
    List<String> all = new ArrayList<>();
    for (int r = 0; r < 2; r++) {
      List<String> got = runReduce(job, id, r, 0, Integer.MAX_VALUE);
      assertEquals(1000, got.size(), "reduce " + r + ": 500 records of each of the 2 maps");
      for (int i = 1; i < got.size(); i++) {
        assertTrue(got.get(i - 1).compareTo(got.get(i)) <= 0, "reduce " + r + " out of order");
      }
      all.addAll(got);
    }
    assertTrue(all.stream().noneMatch(s -> s.contains("second")), "the losing attempt was read");
  }

  @Test
  void aMapAttemptWhoseMapperFailedCommitsNothingAndItsRetryIsRead() throws Exception {
    JobConf job = job(1, 1);
    JobID id = new JobID("failed-mapper", 1);
    // The mapper threw after 300 records: MapTask still flushes and closes the output.
    runMap(job, id, 0, 0, "partial", 300, false);
    runMap(job, id, 0, 1, "retry", 1000, true);
    List<String> got = runReduce(job, id, 0, 0, Integer.MAX_VALUE);
    assertEquals(1000, got.size(), "the retry's whole output, not the failed attempt's part");
    assertTrue(got.stream().allMatch(r -> r.endsWith("=retry0")), got.get(0));
  }

  @Test
  void aReduceAttemptThatFailsHalfWayIsReadAgainWholeByItsRetry() throws Exception {
    JobConf job = job(3, 1);
    JobID id = new JobID("reduce-retry", 1);
    for (int m = 0; m < 3; m++) {
      runMap(job, id, m, 0, "m");
    }
    List<String> partial = runReduce(job, id, 0, 0, 700);
    assertEquals(700, partial.size());
    List<String> whole = runReduce(job, id, 0, 1, Integer.MAX_VALUE);
    assertEquals(3000, whole.size());
    assertEquals(partial, whole.subList(0, 700), "the retry reads the same merge from the start");
  }
}
