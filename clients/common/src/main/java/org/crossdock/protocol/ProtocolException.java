package org.crossdock.protocol;

import java.io.IOException;

/** A frame that cannot be decoded; {@link #code()} is the error a receiver would answer. */
public class ProtocolException extends IOException {
  private static final long serialVersionUID = 1L;
  private final ErrorCode code;

  public ProtocolException(ErrorCode code, String message) {
    super(code.wireName() + ": " + message);
    this.code = code;
  }

  public ErrorCode code() {
    return code;
  }
}
