package org.crossdock.client;

import java.io.IOException;
import org.crossdock.protocol.ErrorCode;

/**
 * A failed Crossdock call. {@link #kind()} tells a transport failure (connection refused, broken,
 * timed out: the peer may be gone) from an error the peer answered ({@link #code()}) and from data
 * that failed its checks.
 */
public class CrossdockException extends IOException {
  private static final long serialVersionUID = 1L;

  public enum Kind {
    /** The peer answered an Error frame. */
    REMOTE,
    /** Could not connect, the connection broke, or no answer in time. */
    TRANSPORT,
    /** Received data failed its CRC32C, order or count check. */
    CORRUPT,
    /** The peer sent something this client does not understand. */
    PROTOCOL,
    /**
     * This client failed while handling the peer's answers (the JVM out of memory, a defect):
     * not the copy's fault, and reading another copy or asking again would most likely meet it
     * again, so the read fails at once with the cause.
     */
    LOCAL
  }

  private final Kind kind;
  private final String addr;
  private final int rawCode;

  public CrossdockException(Kind kind, String addr, int rawCode, String message, Throwable cause) {
    super(message, cause);
    this.kind = kind;
    this.addr = addr;
    this.rawCode = rawCode;
  }

  public static CrossdockException remote(String addr, int code, String message) {
    ErrorCode c = ErrorCode.fromCode(code);
    String name = c == null ? "error " + code : c.toString();
    return new CrossdockException(Kind.REMOTE, addr, code, addr + " answered " + name + ": " + message, null);
  }

  public static CrossdockException transport(String addr, String what, Throwable cause) {
    String detail = cause == null ? "" : ": " + cause;
    return new CrossdockException(Kind.TRANSPORT, addr, 0, what + " (" + addr + ")" + detail, cause);
  }

  public static CrossdockException corrupt(String addr, String what) {
    return new CrossdockException(Kind.CORRUPT, addr, 0, what + " (from " + addr + ")", null);
  }

  public static CrossdockException protocol(String addr, String what, Throwable cause) {
    return new CrossdockException(Kind.PROTOCOL, addr, 0, what + " (" + addr + ")", cause);
  }

  /** This client failed on its own while handling what {@code addr} sent ({@link Kind#LOCAL}). */
  public static CrossdockException local(String addr, String what, Throwable cause) {
    return new CrossdockException(Kind.LOCAL, addr, 0, what + " (" + addr + "): " + cause, cause);
  }

  /**
   * Throws the {@link Error} behind {@code e} if {@code e} is this client's own failure ({@link
   * Kind#LOCAL}) caused by one, so that the task meets it as if it had hit it itself and the
   * engine's policy for it applies (Spark ends an executor on a JVM out of memory).
   */
  public static void throwIfLocalError(IOException e) {
    if (e instanceof CrossdockException c && c.kind == Kind.LOCAL
        && c.getCause() instanceof Error err) {
      throw err;
    }
  }

  /** Whether {@code t} is this client's own failure ({@link Kind#LOCAL}). */
  public static boolean isLocal(Throwable t) {
    return t instanceof CrossdockException c && c.kind == Kind.LOCAL;
  }

  public Kind kind() {
    return kind;
  }

  public String addr() {
    return addr;
  }

  /** The error code of a REMOTE failure, or null (also for codes newer than this build). */
  public ErrorCode code() {
    return kind == Kind.REMOTE ? ErrorCode.fromCode(rawCode) : null;
  }

  public int rawCode() {
    return rawCode;
  }

  public boolean isTransport() {
    return kind == Kind.TRANSPORT;
  }
}
