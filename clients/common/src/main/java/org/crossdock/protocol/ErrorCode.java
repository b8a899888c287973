package org.crossdock.protocol;

/** Error codes carried by {@code Error} frames (docs/protocol.md, "Error codes"). */
public enum ErrorCode {
  MALFORMED_FRAME(1, "malformed_frame"),
  TRUNCATED_FRAME(2, "truncated_frame"),
  FRAME_TOO_LARGE(3, "frame_too_large"),
  UNSUPPORTED_VERSION(4, "unsupported_version"),
  UNKNOWN_MESSAGE_KIND(5, "unknown_message_kind"),
  UNKNOWN_APP(16, "unknown_app"),
  UNKNOWN_SHUFFLE(17, "unknown_shuffle"),
  UNKNOWN_PARTITION(18, "unknown_partition"),
  UNKNOWN_MAP(19, "unknown_map"),
  UNKNOWN_WORKER(20, "unknown_worker"),
  BAD_CHECKSUM(32, "bad_checksum"),
  BATCH_TOO_LARGE(33, "batch_too_large"),
  PUSH_AFTER_COMMIT(34, "push_after_commit"),
  SHUFFLE_NOT_COMPLETE(35, "shuffle_not_complete"),
  SHUFFLE_EXISTS(36, "shuffle_exists"),
  COMMIT_MISMATCH(37, "commit_mismatch"),
  INVALID_ARGUMENT(38, "invalid_argument"),
  NO_WORKERS(48, "no_workers"),
  WORKER_UNAVAILABLE(49, "worker_unavailable"),
  CORRUPT_DATA(50, "corrupt_data"),
  IO(51, "io"),
  INTERNAL(52, "internal"),
  SHUTTING_DOWN(53, "shutting_down"),
  LIMIT_EXCEEDED(54, "limit_exceeded"),
  UNAUTHORIZED(55, "unauthorized"),
  DATA_LOST(56, "data_lost");

  private final int code;
  private final String wireName;

  ErrorCode(int code, String wireName) {
    this.code = code;
    this.wireName = wireName;
  }

  /** The code's wire value (a u16). */
  public int code() {
    return code;
  }

  /** The stable snake_case name used in docs, logs and the test vectors. */
  public String wireName() {
    return wireName;
  }

  /** The code for a wire value, or null if this build does not know it. */
  public static ErrorCode fromCode(int code) {
    for (ErrorCode c : values()) {
      if (c.code == code) {
        return c;
      }
    }
    return null;
  }

  /** The code for a snake_case name, or null. */
  public static ErrorCode fromName(String name) {
    for (ErrorCode c : values()) {
      if (c.wireName.equals(name)) {
        return c;
      }
    }
    return null;
  }

  @Override
  public String toString() {
    return wireName + " (" + code + ")";
  }
}
