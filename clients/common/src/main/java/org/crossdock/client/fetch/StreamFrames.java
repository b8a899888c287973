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
    byte[] raw = new byte[FrameHeader.LEN];
    FrameHeader h;
    byte[] body;
    try {
      in.readFully(raw);
      h = FrameHeader.decode(raw, 0);
      Codec.checkHeader(h);
      if (h.bodyLen() > Codec.MAX_CONTROL_FRAME) {
        throw CrossdockException.corrupt(
            addr, "fetch frame of " + h.bodyLen() + " bytes exceeds the limit");
      }
      body = new byte[h.bodyLen()];
      in.readFully(body);
      return new Codec.Frame(h, Codec.decodeBody(h.kind(), ByteBuffer.wrap(body)));
    } catch (ProtocolException e) {
      throw CrossdockException.protocol(addr, e.getMessage(), e);
    } catch (EOFException e) {
      throw CrossdockException.transport(addr, "fetch stream closed before its end", e);
    } catch (CrossdockException e) {
      throw e;
    } catch (IOException e) {
      throw CrossdockException.transport(addr, "fetch stream broke", e);
    }
  }
}
