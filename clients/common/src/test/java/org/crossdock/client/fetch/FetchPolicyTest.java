package org.crossdock.client.fetch;

import static org.junit.jupiter.api.Assertions.*;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The adaptive-fetch paper's two rules (Nicolae et al., TPDS 2017): source choice by {@code
 * (avgWait + 1) * inFlight} (Algorithm 1) and the elastic in-flight limit (Algorithm 2), worked
 * through by hand.
 */
class FetchPolicyTest {
  private static final java.util.function.Predicate<String> NONE_LOCAL = a -> false;

  @Test
  void theScoreIsWaitPlusOneTimesInFlight() {
    FetchMonitor m = new FetchMonitor();
    assertEquals(0, m.score("a"), "nothing known: score 0");
    m.waited("a", 9);
    assertEquals(0, m.score("a"), "nothing in flight: still 0 however slow it was");
    m.requested("a", 10);
    assertEquals((9 + 1) * 10, m.score("a"));
    m.waited("a", 3);
    assertEquals((6 + 1) * 10, m.score("a"), "average of 9 and 3");
    m.arrived("a", 4);
    assertEquals((6 + 1) * 6, m.score("a"));
    m.arrived("a", 100);
    assertEquals(0, m.inFlight("a"), "never below zero");
  }

  @Test
  void theAverageIsOverTheLastWindowOfBatches() {
    FetchMonitor m = new FetchMonitor();
    m.waited("a", 1000);
    for (int i = 0; i < FetchMonitor.WINDOW; i++) {
      m.waited("a", 2);
    }
    assertEquals(2.0, m.avgWaitMs("a"), 1e-9, "the old sample left the window");
  }

  @Test
  void theLowestScoreWinsTiesGoToTheFirstListedAndLocalComesFirst() {
    FetchMonitor m = new FetchMonitor();
    // Scores: a = (1+1)*15 = 30, b = (0+1)*10 = 10, c = (1+1)*10 = 20.
    m.requested("a", 15);
    m.waited("a", 1);
    m.requested("b", 10);
    m.requested("c", 10);
    m.waited("c", 1);
    assertEquals("b", m.choose(List.of("a", "b", "c"), NONE_LOCAL),
        "the best score so far, not the reader's own (the paper's misprint)");
    assertEquals("x", m.choose(List.of("x", "y"), NONE_LOCAL), "a tie: the first listed");
    assertEquals("y", m.choose(List.of("x", "y"), "y"::equals), "local over remote");
    assertEquals("b", m.choose(List.of("a", "b"), a -> true), "among locals, the score");
  }

  @Test
  void theLimitStaysBetweenOneIncrementAndTheHardLimit() {
    assertEquals(2, new ElasticLimit(10, 2, 0.5).withFloor(0).startingAt(0).soft(),
        "never below one increment");
    assertEquals(4, new ElasticLimit(10, 2, 0.5).withFloor(4).startingAt(0).soft(),
        "nor below its floor");
    ElasticLimit l = new ElasticLimit(10, 2, 0.5).skippingFirstWait();
    assertEquals(10, l.soft(), "as the paper has it, it starts at the hard limit");
    l.consumed(1_000_000_000L);
    assertEquals(10, l.soft(), "the first request's wait (connecting) counts for nothing");
    assertTrue(l.averageWaitNanos() < 0, "nor goes into the average");
    l.squeeze(3);
    assertEquals(3, l.soft(), "memory refused: no more than what is held");
    l.squeeze(0);
    assertEquals(2, l.soft(), "but never below one increment");
    assertThrows(IllegalArgumentException.class, () -> new ElasticLimit(1, 2, 0.5));
    ElasticLimit atHard = new ElasticLimit(10, 2, 0.5);
    atHard.consumed(0);
    atHard.consumed(5_000_000);
    assertEquals(10, atHard.soft(), "a wait above the average at the hard limit keeps it");
    assertEquals(0, atHard.grown(), "and is no grow");
  }

  /**
   * A task's limit as the Spark reader makes it (2 MiB increments of a 48 MiB hard limit),
   * starting from {@code from}, its first request (connecting) already read.
   */
  static ElasticLimit task(FetchMonitor.Learned from) {
    ElasticLimit l = FetchScheduler.adaptiveLimit(48 << 20, 2 << 20, from);
    l.consumed(50_000_000);
    return l;
  }

  @Test
  void aRunOfQuietRequestsGoesOnInTheNextTask() {
    // A Spark task reads a few requests; its limit goes to the executor's next task. A run of
    // requests without a wait must go with it, or a limit that a wait grew never shrinks.
    ElasticLimit first = task(new FetchMonitor.Learned(10 << 20, 1_000_000, 0, 0));
    for (int i = 0; i < 5; i++) {
      first.consumed(0);
    }
    assertEquals(10 << 20, first.soft(), "5 quiet requests: not yet");
    assertEquals(5, first.quietRun());
    ElasticLimit next = task(FetchMonitor.Learned.of(first));
    ElasticLimit alone = task(
        new FetchMonitor.Learned(first.soft(), first.averageWaitNanos(), 0, 0));
    for (int i = 0; i < 3; i++) {
      next.consumed(0);
      alone.consumed(0);
    }
    assertEquals(8 << 20, next.soft(), "the 8th quiet request in a row shrinks, across tasks");
    assertEquals(0, next.quietRun(), "a shrink starts a new run");
    assertEquals(10 << 20, alone.soft(), "counted per task, 3 quiet requests shrink nothing");
    next.consumed(0);
    next.consumed(5_000_000);
    assertEquals(0, next.quietRun(), "a wait ends the run");
    assertEquals(1, next.waitRun());
    assertEquals(8 << 20, next.soft(), "a lone wait above the average grows nothing");
    assertEquals(0, next.grown());
    assertEquals(1, next.shrunk(), "each change counted");
    ElasticLimit third = task(FetchMonitor.Learned.of(next));
    third.consumed(5_000_000);
    assertEquals(10 << 20, third.soft(), "the second wait in a row grows, across tasks");
    assertEquals(1, third.grown());
    assertEquals(0, new ElasticLimit(10, 2, 0.5).withQuietRun(3).quietRun(),
        "the paper's rule keeps no run");
  }

  static JsonNode vectors() throws Exception {
    Path p = org.crossdock.client.CrossdockServer.repoRoot()
        .resolve("testdata/policy/adaptive_fetch.json");
    return new ObjectMapper().readTree(Files.readString(p));
  }

  /** The same decisions as crates/policy, which the simulator drives. */
  @Test
  void theElasticLimitFollowsTheSharedVectors() throws Exception {
    JsonNode cases = vectors().get("elastic_limit");
    assertTrue(cases.size() > 0);
    for (JsonNode c : cases) {
      ElasticLimit l = new ElasticLimit(c.get("hard").asLong(), c.get("inc").asLong(),
          c.get("alpha").asDouble()).withFloor(c.get("floor").asLong())
          .startingAt(c.get("initial").asLong());
      if (c.get("skip_first").asBoolean()) {
        l.skippingFirstWait();
      }
      if (c.has("quiet")) {
        l.shrinkingAfterQuiet(c.get("quiet").asInt());
      }
      if (c.has("initial_avg_ms")) {
        l.withAverage(c.get("initial_avg_ms").asDouble() * 1_000_000);
      }
      if (c.has("waits_to_grow")) {
        l.growingAfterWaits(c.get("waits_to_grow").asInt());
      }
      l.withQuietRun(c.path("initial_quiet").asInt(0))
          .withWaitRun(c.path("initial_waited").asInt(0));
      List<Long> got = new ArrayList<>();
      for (JsonNode w : c.get("waits_ms")) {
        l.consumed(Math.round(w.asDouble() * 1_000_000));
        got.add(l.soft());
      }
      List<Long> want = new ArrayList<>();
      c.get("soft_after").forEach(x -> want.add(x.asLong()));
      assertEquals(want, got, c.get("name").asText());
    }
  }

  @Test
  void theSourceChoiceFollowsTheSharedVectors() throws Exception {
    JsonNode v = vectors();
    assertEquals(FetchMonitor.WINDOW, v.get("window").asInt());
    for (JsonNode c : v.get("source_choice")) {
      FetchMonitor m = new FetchMonitor();
      List<String> names = new ArrayList<>();
      java.util.Set<String> local = new java.util.HashSet<>();
      int i = 0;
      for (JsonNode s : c.get("sources")) {
        String name = "w" + i++;
        names.add(name);
        m.requested(name, s.get("in_flight").asLong());
        for (JsonNode w : s.get("waits_ms")) {
          m.waited(name, w.asLong());
        }
        if (s.get("local").asBoolean()) {
          local.add(name);
        }
      }
      assertEquals(names.get(c.get("choice").asInt()), m.choose(names, local::contains),
          c.get("name").asText());
    }
  }
}
