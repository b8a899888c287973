package org.crossdock.client;

import java.io.InterruptedIOException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.crossdock.protocol.Message;

final class Futures {
  private Futures() {}

  /** Waits for a response; failures come out as {@link CrossdockException}. */
  static Message await(CompletableFuture<Message> f, long timeoutMs, String addr, String what)
      throws CrossdockException, InterruptedIOException {
    try {
      return f.get(timeoutMs, TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      Throwable c = e.getCause();
      if (c instanceof CrossdockException ce) {
        throw ce;
      }
      throw CrossdockException.transport(addr, what + " failed", c);
    } catch (TimeoutException e) {
      throw CrossdockException.transport(addr, "no answer to " + what + " within " + timeoutMs + " ms", null);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      InterruptedIOException ie = new InterruptedIOException("interrupted waiting for " + what);
      ie.initCause(e);
      throw ie;
    }
  }

  static CrossdockException unexpected(String addr, Message m) {
    return CrossdockException.protocol(addr, "unexpected answer " + m.getClass().getSimpleName(), null);
  }
}
