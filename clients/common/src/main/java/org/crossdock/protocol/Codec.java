package org.crossdock.protocol;

import static org.crossdock.protocol.ClusterMessages.*;
import static org.crossdock.protocol.Message.*;

import java.nio.ByteBuffer;
import java.util.Arrays;
import org.crossdock.protocol.Wire.Decoder;
import org.crossdock.protocol.Wire.Reader;
import org.crossdock.protocol.Wire.Writer;

/**
 * Framing of protocol-version-1 messages, byte for byte as docs/protocol.md specifies (the Rust
 * reference is crates/proto). Bodies are each message's own business ({@link Message}): this
 * class writes and checks the frame header and maps each kind byte to its message's decoder.
 */
public final class Codec {
  public static final int VERSION = 2;
  /** Largest body accepted for any frame other than a pushed batch or a fetched chunk. */
  public static final int MAX_CONTROL_FRAME = 64 << 20;

  private Codec() {}

  /** A decoded frame: its header and message. */
  public record Frame(FrameHeader header, Message message) {}

  /**
   * The decoder of every message kind, indexed by kind byte: the one list of the kinds this build
   * knows ({@link #isKnownKind} reads it too).
   */
  private static final Decoder<?>[] DECODERS = new Decoder<?>[256];

  static {
    decoder(KIND_OK, Ok::decode);
    decoder(KIND_ERROR, Message.Error::decode);
    decoder(KIND_HELLO, Hello::decode);
    decoder(KIND_CHALLENGE, Challenge::decode);
    decoder(KIND_AUTHENTICATE, Authenticate::decode);
    decoder(KIND_APP_REGISTERED, AppRegistered::decode);
    decoder(KIND_REGISTER_APP, RegisterApp::decode);
    decoder(KIND_RENEW_LEASE, RenewLease::decode);
    decoder(KIND_UNREGISTER_APP, UnregisterApp::decode);
    decoder(KIND_REGISTER_SHUFFLE, RegisterShuffle::decode);
    decoder(KIND_SHUFFLE_PLACEMENT, ShufflePlacement::decode);
    decoder(KIND_COMMIT_MAP, CommitMap::decode);
    decoder(KIND_COMMIT_RESULT, CommitResult::decode);
    decoder(KIND_UNREGISTER_SHUFFLE, UnregisterShuffle::decode);
    decoder(KIND_GET_SHUFFLE_STATUS, GetShuffleStatus::decode);
    decoder(KIND_SHUFFLE_STATUS, ShuffleStatus::decode);
    decoder(KIND_REPORT_WORKER_FAILURE, ReportWorkerFailure::decode);
    decoder(KIND_REPORT_LOST_COPY, ReportLostCopy::decode);
    decoder(KIND_REGISTER_WORKER, RegisterWorker::decode);
    decoder(KIND_WORKER_REGISTERED, WorkerRegistered::decode);
    decoder(KIND_HEARTBEAT, Heartbeat::decode);
    decoder(KIND_PREPARE_SHUFFLE, PrepareShuffle::decode);
    decoder(KIND_MAP_COMMITTED, MapCommitted::decode);
    decoder(KIND_DELETE_SHUFFLE, DeleteShuffle::decode);
    decoder(KIND_DELETE_APP, DeleteApp::decode);
    decoder(KIND_SYNC_COMMITS, SyncCommits::decode);
    decoder(KIND_CHECK_COPIES, CheckCopies::decode);
    decoder(KIND_COPIES_HELD, CopiesHeld::decode);
    decoder(KIND_PUSH_BATCH, PushBatch::decode);
    decoder(KIND_FETCH, Fetch::decode);
    decoder(KIND_FETCH_CHUNK, FetchChunk::decode);
    decoder(KIND_FETCH_END, FetchEnd::decode);
    decoder(KIND_FETCH_RECORDS, FetchRecords::decode);
    decoder(KIND_GET_WORKER_STATS, GetWorkerStats::decode);
    decoder(KIND_WORKER_STATS, WorkerStats::decode);
    decoder(KIND_SPLIT_PARTITION, SplitPartition::decode);
    decoder(KIND_PARTITION_SPLIT, PartitionSplit::decode);
    decoder(KIND_PUSH_REDIRECT, PushRedirect::decode);
  }

  private static void decoder(int kind, Decoder<? extends Message> d) {
    if (DECODERS[kind] != null) {
      throw new IllegalStateException(String.format("two decoders for kind 0x%02x", kind));
    }
    DECODERS[kind] = d;
  }

  // ------------------------------------------------------------------ encoding

  /** Encodes a whole frame (header and body). */
  public static byte[] encodeFrame(Message m, long requestId) {
    Writer w = new Writer(64);
    w.pos = FrameHeader.LEN;
    m.encode(w);
    return withHeader(w, m.kind(), requestId, 0);
  }

  /**
   * The bytes of a PushBatch frame that come before the payload (frame header and routing
   * header), so a caller can write the payload after them without copying it.
   */
  public static byte[] encodePushPrefix(long requestId, PushHeader h, int payloadLen) {
    Writer w = new Writer(FrameHeader.LEN + 32 + h.appId().length() * 3);
    w.pos = FrameHeader.LEN;
    h.encode(w);
    return withHeader(w, KIND_PUSH_BATCH, requestId, payloadLen);
  }

  /**
   * Writes the frame header into the first {@link FrameHeader#LEN} bytes {@code w} left free,
   * for a body of what {@code w} holds after them plus {@code moreBodyBytes} the caller sends.
   */
  private static byte[] withHeader(Writer w, int kind, long requestId, int moreBodyBytes) {
    int bodyLen = w.pos - FrameHeader.LEN + moreBodyBytes;
    FrameHeader.of(kind, requestId, bodyLen).encode(ByteBuffer.wrap(w.buf, 0, FrameHeader.LEN));
    return Arrays.copyOf(w.buf, w.pos);
  }

  // ------------------------------------------------------------------ decoding

  /**
   * Decodes one whole frame held in {@code frame}: checks the header's length, version and kind,
   * then decodes the body. Bytes after the frame's length are ignored.
   */
  public static Frame decodeFrame(byte[] frame) throws ProtocolException {
    if (frame.length < FrameHeader.LEN) {
      throw new ProtocolException(
          ErrorCode.TRUNCATED_FRAME, "frame of " + frame.length + " bytes has no full header");
    }
    FrameHeader h = FrameHeader.decode(frame, 0);
    checkHeader(h);
    if ((long) frame.length - FrameHeader.LEN < h.bodyLen()) {
      throw new ProtocolException(
          ErrorCode.TRUNCATED_FRAME,
          "frame announces " + h.bodyLen() + " body bytes but has "
              + (frame.length - FrameHeader.LEN));
    }
    ByteBuffer body = ByteBuffer.wrap(frame, FrameHeader.LEN, h.bodyLen()).slice();
    return new Frame(h, decodeBody(h.kind(), body));
  }

  /** Checks a header's version and kind. */
  public static void checkHeader(FrameHeader h) throws ProtocolException {
    if (h.version() != VERSION) {
      throw new ProtocolException(
          ErrorCode.UNSUPPORTED_VERSION,
          "protocol version " + h.version() + " is not supported (this build speaks version " + VERSION + ")");
    }
    if (!isKnownKind(h.kind())) {
      throw unknownKind(h.kind());
    }
  }

  public static boolean isKnownKind(int kind) {
    return kind >= 0 && kind < DECODERS.length && DECODERS[kind] != null;
  }

  /**
   * Decodes a body of the given kind. The buffer's content from position to limit is the body;
   * payloads in the result are views of it (not copies).
   */
  public static Message decodeBody(int kind, ByteBuffer body) throws ProtocolException {
    if (!isKnownKind(kind)) {
      throw unknownKind(kind);
    }
    return (Message) DECODERS[kind].decode(new Reader(body));
  }

  private static ProtocolException unknownKind(int kind) {
    return new ProtocolException(
        ErrorCode.UNKNOWN_MESSAGE_KIND, String.format("unknown message kind 0x%02x", kind));
  }
}
