package org.crossdock.client.fetch;

import static org.junit.jupiter.api.Assertions.*;

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
  void theLimitGrowsWhenTheTaskWaitsMoreThanUsualAndShrinksOtherwise() {
    assertEquals(2, new ElasticLimit(10, 2, 0).soft(), "never starts below one increment");
    ElasticLimit l = new ElasticLimit(10, 2, 10);
    assertEquals(10, l.soft(), "starts where asked: the paper's hard limit");
    l.consumed(1_000_000);
    assertEquals(10, l.soft(), "the first batch's wait (connecting) counts for nothing");
    l.consumed(5);
    assertEquals(10, l.soft(), "the next wait only starts the average");
    l.consumed(9);
    assertEquals(10, l.soft(), "above average at the hard limit: kept (the paper's code shrinks)");
    l.consumed(1); // average 5, wait 1: shrink
    assertEquals(8, l.soft());
    l.consumed(0);
    l.consumed(0);
    l.consumed(0);
    assertEquals(2, l.soft(), "down to one increment (the paper's code stops at two)");
    l.consumed(0);
    assertEquals(2, l.soft(), "never below one increment");
    l.consumed(50); // far above the average: grow
    assertEquals(4, l.soft());
    l.squeeze(3);
    assertEquals(3, l.soft(), "memory refused: no more than what is held");
    l.squeeze(0);
    assertEquals(2, l.soft(), "but never below one increment");
    assertThrows(IllegalArgumentException.class, () -> new ElasticLimit(1, 2, 1));
  }
}
