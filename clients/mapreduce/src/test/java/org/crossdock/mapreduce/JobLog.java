package org.crossdock.mapreduce;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.mapred.LocalJobRunner;
import org.apache.hadoop.mapreduce.Job;
import org.apache.log4j.AppenderSkeleton;
import org.apache.log4j.Logger;
import org.apache.log4j.spi.LoggingEvent;

/**
 * What the job client and the local job runner log about the jobs run while it is open: the
 * counters of a job run by a tool as it ships (TeraSort keeps its Job object to itself; the job
 * client logs the counters when the job ends, the tool waiting verbosely), keyed by display name
 * ("Spilled Records"); and why a job failed (the local runner logs the task's exception, which
 * its job status does not carry).
 */
final class JobLog implements AutoCloseable {
  private static final Pattern COUNTER = Pattern.compile("^\\s+([^=\\n]+)=(\\d+)\\s*$",
      Pattern.MULTILINE);
  private final List<Logger> loggers =
      List.of(Logger.getLogger(Job.class), Logger.getLogger(LocalJobRunner.class));
  private final Capture capture = new Capture();
  private volatile String counters;
  private final List<String> failures = new ArrayList<>();

  JobLog() {
    for (Logger l : loggers) {
      l.addAppender(capture);
    }
  }

  /** The counters of the last job that ended since this capture began; empty if none. */
  Map<String, Long> counters() {
    Map<String, Long> out = new HashMap<>();
    String text = counters;
    if (text != null) {
      Matcher m = COUNTER.matcher(text);
      while (m.find()) {
        out.put(m.group(1).trim(), Long.parseLong(m.group(2)));
      }
    }
    return out;
  }

  /** The exceptions (with their causes) that failed jobs, in the order they were logged. */
  List<String> failures() {
    synchronized (failures) {
      return List.copyOf(failures);
    }
  }

  @Override
  public void close() {
    for (Logger l : loggers) {
      l.removeAppender(capture);
    }
  }

  private final class Capture extends AppenderSkeleton {
    @Override
    protected void append(LoggingEvent event) {
      String msg = event.getRenderedMessage();
      if (msg != null && msg.startsWith("Counters: ")) {
        counters = msg;
      }
      if (event.getThrowableInformation() != null) {
        StringWriter w = new StringWriter();
        event.getThrowableInformation().getThrowable().printStackTrace(new PrintWriter(w));
        synchronized (failures) {
          failures.add(w.toString());
        }
      }
    }

    @Override
    public void close() {}

    @Override
    public boolean requiresLayout() {
      return false;
    }
  }
}
