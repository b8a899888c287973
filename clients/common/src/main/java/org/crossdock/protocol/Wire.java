package org.crossdock.protocol;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The body primitives of docs/protocol.md ("Body primitives"): big-endian integers, {@code bool},
 * {@code string} and {@code list<T>}. Each message and each structure inside a body writes its
 * own fields with a {@link Writer} and reads them with a {@link Reader} (see {@link Message}), so
 * a layout is written once, next to its fields; this file only knows the primitives.
 */
public final class Wire {
  public static final int MAX_STRING = 0xffff;

  private Wire() {}

  /** A value with a body layout: {@link #encode} appends its fields in wire order. */
  public interface Encodable {
    void encode(Writer w);
  }

  /** Reads one value of a body layout (each structure's static {@code decode}). */
  @FunctionalInterface
  public interface Decoder<T> {
    T decode(Reader r) throws ProtocolException;
  }

  /** A growable big-endian body writer. */
  public static final class Writer {
    byte[] buf;
    int pos;

    Writer(int cap) {
      buf = new byte[Math.max(cap, 16)];
    }

    private void ensure(int n) {
      if (pos + n > buf.length) {
        buf = Arrays.copyOf(buf, Math.max(buf.length * 2, pos + n));
      }
    }

    public void u8(int v) {
      ensure(1);
      buf[pos++] = (byte) v;
    }

    public void u16(int v) {
      ensure(2);
      buf[pos++] = (byte) (v >>> 8);
      buf[pos++] = (byte) v;
    }

    public void u32(int v) {
      ensure(4);
      buf[pos++] = (byte) (v >>> 24);
      buf[pos++] = (byte) (v >>> 16);
      buf[pos++] = (byte) (v >>> 8);
      buf[pos++] = (byte) v;
    }

    public void u64(long v) {
      u32((int) (v >>> 32));
      u32((int) v);
    }

    /** An appended u64: nothing when empty (a sender that predates the field). */
    public void appendedU64(java.util.OptionalLong v) {
      if (v.isPresent()) {
        u64(v.getAsLong());
      }
    }

    /** An appended u32: nothing when empty (a sender that predates the field). */
    public void appendedU32(java.util.OptionalInt v) {
      if (v.isPresent()) {
        u32(v.getAsInt());
      }
    }

    public void bool(boolean v) {
      u8(v ? 1 : 0);
    }

    public void str(String s) {
      byte[] b = s.getBytes(StandardCharsets.UTF_8);
      if (b.length > MAX_STRING) {
        throw new IllegalArgumentException("string field longer than 65535 bytes");
      }
      u16(b.length);
      ensure(b.length);
      System.arraycopy(b, 0, buf, pos, b.length);
      pos += b.length;
    }

    /** The buffer's remaining bytes, raw (its position is not changed). */
    public void bytes(ByteBuffer b) {
      ByteBuffer d = b.duplicate();
      ensure(d.remaining());
      int n = d.remaining();
      d.get(buf, pos, n);
      pos += n;
    }

    public void u32List(int[] xs) {
      u32(xs.length);
      for (int x : xs) {
        u32(x);
      }
    }

    public void u64List(long[] xs) {
      u32(xs.length);
      for (long x : xs) {
        u64(x);
      }
    }

    public void strList(List<String> xs) {
      u32(xs.size());
      for (String x : xs) {
        str(x);
      }
    }

    /** A {@code list<T>} of structures, each encoding itself. */
    public void list(List<? extends Encodable> xs) {
      u32(xs.size());
      for (Encodable x : xs) {
        x.encode(this);
      }
    }
  }

  /** A bounds-checked big-endian body reader. */
  public static final class Reader {
    private final ByteBuffer b;

    public Reader(ByteBuffer body) {
      this.b = body.slice().order(ByteOrder.BIG_ENDIAN);
    }

    public int remaining() {
      return b.remaining();
    }

    private void need(long n, String field) throws ProtocolException {
      if (b.remaining() < n) {
        throw new ProtocolException(
            ErrorCode.TRUNCATED_FRAME,
            "frame body ends " + (n - b.remaining()) + " byte(s) early while reading " + field);
      }
    }

    /** A u64 appended to a body after its version was fixed: empty when the body ends first. */
    public java.util.OptionalLong appendedU64(String f) throws ProtocolException {
      return b.remaining() == 0 ? java.util.OptionalLong.empty() : java.util.OptionalLong.of(u64(f));
    }

    /** A u32 appended to a body after its version was fixed: empty when the body ends first. */
    public java.util.OptionalInt appendedU32(String f) throws ProtocolException {
      return b.remaining() == 0 ? java.util.OptionalInt.empty() : java.util.OptionalInt.of(u32(f));
    }

    public int u8(String f) throws ProtocolException {
      need(1, f);
      return b.get() & 0xff;
    }

    public int u16(String f) throws ProtocolException {
      need(2, f);
      return b.getShort() & 0xffff;
    }

    public int u32(String f) throws ProtocolException {
      need(4, f);
      return b.getInt();
    }

    public long u64(String f) throws ProtocolException {
      need(8, f);
      return b.getLong();
    }

    public boolean bool(String f) throws ProtocolException {
      int v = u8(f);
      if (v == 0) {
        return false;
      }
      if (v == 1) {
        return true;
      }
      throw new ProtocolException(ErrorCode.MALFORMED_FRAME, f + " must be 0 or 1, got " + v);
    }

    public String str(String f) throws ProtocolException {
      int len = u16(f);
      need(len, f);
      ByteBuffer raw = b.slice();
      raw.limit(len);
      b.position(b.position() + len);
      try {
        return StandardCharsets.UTF_8
            .newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT)
            .decode(raw)
            .toString();
      } catch (CharacterCodingException e) {
        throw new ProtocolException(ErrorCode.MALFORMED_FRAME, f + " is not valid UTF-8");
      }
    }

    /** {@code n} raw bytes as a read-only view. */
    public ByteBuffer bytes(long n, String f) throws ProtocolException {
      need(n, f);
      ByteBuffer v = b.slice();
      v.limit((int) n);
      b.position(b.position() + (int) n);
      return v.asReadOnlyBuffer();
    }

    /** Everything not read yet. */
    public ByteBuffer rest() {
      ByteBuffer v = b.slice().asReadOnlyBuffer();
      b.position(b.limit());
      return v;
    }

    /**
     * A list count whose elements (at least {@code minElem} bytes each) fit in the rest: a
     * hostile count is truncated_frame here, before anything is allocated for it.
     */
    public int count(int minElem, String f) throws ProtocolException {
      long n = Integer.toUnsignedLong(u32(f));
      need(n * minElem, f);
      return (int) n;
    }

    public int[] u32List(String f) throws ProtocolException {
      int n = count(4, f);
      int[] out = new int[n];
      for (int i = 0; i < n; i++) {
        out[i] = b.getInt();
      }
      return out;
    }

    public long[] u64List(String f) throws ProtocolException {
      int n = count(8, f);
      long[] out = new long[n];
      for (int i = 0; i < n; i++) {
        out[i] = b.getLong();
      }
      return out;
    }

    public List<String> strList(String f) throws ProtocolException {
      return list(2, f, r -> r.str(f));
    }

    /** A {@code list<T>} whose elements take at least {@code minElem} bytes each. */
    public <T> List<T> list(int minElem, String f, Decoder<T> element) throws ProtocolException {
      int n = count(minElem, f);
      List<T> out = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        out.add(element.decode(this));
      }
      return out;
    }
  }
}
