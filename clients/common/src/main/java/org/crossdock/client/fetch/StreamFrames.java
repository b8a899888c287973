package org.crossdock.client.fetch;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import org.crossdock.client.CrossdockException;
import org.crossdock.protocol.Codec;
import org.crossdock.protocol.FrameHeader;
import org.crossdock.protocol.ProtocolException;

/** Reading the frames of a fetch stream, with every failure named as a Crossdock error. */
public final class StreamFrames {
  private StreamFrames() {}

  /**
   * Reads one whole frame from {@code in}: its header is checked (version, kind, size) before
   * its body is allocated. A cut stream is a TRANSPORT error, bytes that are not a frame a
   * PROTOCOL one.
   */
  public static Codec.Frame read(DataInputStream in, String addr) throws CrossdockException {
    return readBody(in, readHeader(in, addr), addr);
  }

  /**
   * Reads and checks the header of the next frame (version, kind, size), so that a reader can
   * decide whether it has room for the body before allocating it.
   */
  public static FrameHeader readHeader(DataInputStream in, String addr)
      throws CrossdockException {
    byte[] raw = new byte[FrameHeader.LEN];
    try {
      in.readFully(raw);
      FrameHeader h = FrameHeader.decode(raw, 0);
      Codec.checkHeader(h);
      if (h.bodyLen() > Codec.MAX_CONTROL_FRAME) {
        throw CrossdockException.corrupt(
            addr, "fetch frame of " + h.bodyLen() + " bytes exceeds the limit");
      }
      return h;
    } catch (IOException e) {
      throw named(e, addr);
    }
  }

  /** Reads the body of the frame whose header {@link #readHeader} returned, and decodes it. */
  public static Codec.Frame readBody(DataInputStream in, FrameHeader h, String addr)
      throws CrossdockException {
    try {
      byte[] body = new byte[h.bodyLen()];
      in.readFully(body);
      return new Codec.Frame(h, Codec.decodeBody(h.kind(), ByteBuffer.wrap(body)));
    } catch (IOException e) {
      throw named(e, addr);
    }
  }

  private static CrossdockException named(IOException e, String addr) {
    if (e instanceof CrossdockException c) {
      return c;
    }
    if (e instanceof ProtocolException) {
      return CrossdockException.protocol(addr, e.getMessage(), e);
    }
    if (e instanceof EOFException) {
      return CrossdockException.transport(addr, "fetch stream closed before its end", e);
    }
    return CrossdockException.transport(addr, "fetch stream broke", e);
  }
}
