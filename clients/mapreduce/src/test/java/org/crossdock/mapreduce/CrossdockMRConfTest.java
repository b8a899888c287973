package org.crossdock.mapreduce;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.TaskType;
import org.junit.jupiter.api.Test;

/**
 * The windows' defaults follow the heap of the tasks that hold them, read from the job's
 * configuration so that every task of the job agrees (a map sizes its runs' batches for the
 * reducers' fetch window).
 */
class CrossdockMRConfTest {
  static final long MIB = 1L << 20;

  static Configuration onYarn() {
    Configuration c = new Configuration(false);
    c.set(CrossdockMRConf.COORDINATOR, "127.0.0.1:1");
    c.set(CrossdockMRConf.FRAMEWORK, "crossdock-yarn");
    return c;
  }

  @Test
  void aTaskHeapIsItsXmxOrItsContainerTimesMapReducesRatio() {
    Configuration c = onYarn();
    c.set("mapreduce.map.java.opts", "-XX:+UseG1GC -Xmx200m");
    c.set("mapred.child.java.opts", "-Xmx1g");
    assertEquals(200 * MIB, CrossdockMRConf.taskHeap(c, TaskType.MAP, false));
    assertEquals(1024 * MIB, CrossdockMRConf.taskHeap(c, TaskType.REDUCE, false),
        "the reduce's own options are not set: the child's");
    Configuration none = onYarn();
    none.setInt("mapreduce.reduce.memory.mb", 512);
    assertEquals(410 * MIB, CrossdockMRConf.taskHeap(none, TaskType.REDUCE, false),
        "no -Xmx: MapReduce's 0.8 of the container, rounded up");
    assertEquals(820 * MIB, CrossdockMRConf.taskHeap(none, TaskType.MAP, false),
        "MapReduce's default container, 1024 MiB");
    Configuration admin = onYarn();
    admin.set("mapreduce.admin.reduce.child.java.opts", "-Djava.net.preferIPv4Stack=true -Xmx300m");
    assertEquals(300 * MIB, CrossdockMRConf.taskHeap(admin, TaskType.REDUCE, false),
        "the administrator's -Xmx, where the job sets none");
    admin.set("mapreduce.reduce.java.opts", "-Xmx2g");
    assertEquals(2048 * MIB, CrossdockMRConf.taskHeap(admin, TaskType.REDUCE, false),
        "the job's own, after the administrator's");
    Configuration ratio = onYarn();
    ratio.setInt("mapreduce.map.memory.mb", 1000);
    ratio.setFloat("mapreduce.job.heap.memory-mb.ratio", 0.5f);
    assertEquals(500 * MIB, CrossdockMRConf.taskHeap(ratio, TaskType.MAP, false));
    ratio.setFloat("mapreduce.job.heap.memory-mb.ratio", 1.5f);
    assertEquals(800 * MIB, CrossdockMRConf.taskHeap(ratio, TaskType.MAP, false),
        "a ratio outside [0, 1]: MapReduce's default, 0.8");
    long jvm = Runtime.getRuntime().maxMemory();
    Configuration local = new Configuration(false);
    local.setInt("mapreduce.local.map.tasks.maximum", 4);
    assertEquals(jvm / 4, CrossdockMRConf.taskHeap(local, TaskType.MAP, true));
    assertEquals(jvm, CrossdockMRConf.taskHeap(local, TaskType.REDUCE, true));
    Configuration unset = new Configuration(false);
    unset.set(CrossdockMRConf.COORDINATOR, "127.0.0.1:1");
    unset.set("mapreduce.reduce.java.opts", "-Xmx64m");
    assertEquals(org.crossdock.client.TaskWindows.windowFor(jvm, 48 * MIB, 8), new CrossdockMRConf(unset).fetchMaxInFlight,
        "no framework set: the local job runner, whose tasks have the JVM's heap");
  }

  @Test
  void theWindowsAreAShareOfTheTaskHeapUpToTheirFixedDefaults() {
    Configuration small = onYarn();
    small.set("mapreduce.map.java.opts", "-Xmx64m");
    small.set("mapreduce.reduce.java.opts", "-Xmx64m");
    CrossdockMRConf s = new CrossdockMRConf(small);
    assertEquals(4 * MIB, s.pushMaxInFlight, "a sixteenth of the map's heap");
    assertEquals(8 * MIB, s.fetchMaxInFlight, "an eighth of the reduce's heap");
    CrossdockMRConf usual = new CrossdockMRConf(onYarn());
    assertEquals(32 * MIB, usual.pushMaxInFlight, "820 MiB maps: the fixed default");
    assertEquals(48 * MIB, usual.fetchMaxInFlight);
    Configuration tiny = onYarn();
    tiny.set("mapreduce.reduce.java.opts", "-Xmx4m");
    assertEquals(MIB, new CrossdockMRConf(tiny).fetchMaxInFlight, "at least 1 MiB");
    Configuration set = onYarn();
    set.set("mapreduce.map.java.opts", "-Xmx64m");
    set.set(CrossdockMRConf.PUSH_MAX_IN_FLIGHT, "16m");
    assertEquals(16 * MIB, new CrossdockMRConf(set).pushMaxInFlight, "a window set by hand stands");
    set.set(CrossdockMRConf.FETCH_MAX_IN_FLIGHT, "0");
    assertThrows(IllegalArgumentException.class, () -> new CrossdockMRConf(set));
  }
}
