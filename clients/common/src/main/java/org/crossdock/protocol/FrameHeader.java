package org.crossdock.protocol;

import java.nio.ByteBuffer;

/**
 * The 16-byte header of every frame: {@code u32 length} (12 + body length), {@code u8 version},
 * {@code u8 kind}, {@code u16 flags}, {@code u64 request_id}. Big-endian.
 */
public record FrameHeader(int bodyLen, int version, int kind, int flags, long requestId) {
  public static final int LEN = 16;
  /** Bytes counted by the length field that belong to the header. */
  public static final int AFTER_LEN = 12;

  public static FrameHeader of(int kind, long requestId, int bodyLen) {
    return new FrameHeader(bodyLen, Codec.VERSION, kind, 0, requestId);
  }

  /** Writes the header at the buffer's position. */
  public void encode(ByteBuffer out) {
    out.putInt(bodyLen + AFTER_LEN);
    out.put((byte) version);
    out.put((byte) kind);
    out.putShort((short) flags);
    out.putLong(requestId);
  }

  public byte[] encode() {
    ByteBuffer b = ByteBuffer.allocate(LEN);
    encode(b);
    return b.array();
  }

  /**
   * Decodes a header from 16 bytes. Only the length is checked here; the version and kind are
   * checked by the receiver, which needs the request id to answer.
   */
  public static FrameHeader decode(byte[] raw, int off) throws ProtocolException {
    ByteBuffer b = ByteBuffer.wrap(raw, off, LEN);
    long length = Integer.toUnsignedLong(b.getInt());
    if (length < AFTER_LEN) {
      throw new ProtocolException(
          ErrorCode.MALFORMED_FRAME,
          "frame length " + length + " is shorter than the 12 header bytes it must cover");
    }
    if (length - AFTER_LEN > Integer.MAX_VALUE) {
      throw new ProtocolException(ErrorCode.FRAME_TOO_LARGE, "frame of " + length + " bytes");
    }
    int version = b.get() & 0xff;
    int kind = b.get() & 0xff;
    int flags = b.getShort() & 0xffff;
    long requestId = b.getLong();
    return new FrameHeader((int) (length - AFTER_LEN), version, kind, flags, requestId);
  }
}
