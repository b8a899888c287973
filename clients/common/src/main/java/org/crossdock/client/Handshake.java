package org.crossdock.client;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import org.crossdock.protocol.Auth;
import org.crossdock.protocol.Codec;
import org.crossdock.protocol.FrameHeader;
import org.crossdock.protocol.Message;

/**
 * Proves an app's token on a freshly opened socket before anything else is sent on it
 * (docs/security.md): {@code Hello} is answered by the connection's nonce, {@code Authenticate}
 * carries the HMAC of that nonce keyed with the token. The token itself never crosses the
 * network, and a recorded handshake is worth nothing on another connection. Uses request ids 1
 * and 2; callers number their own requests from {@link #NEXT_ID}.
 */
public final class Handshake {
  /** The first request id free after a handshake. */
  public static final long NEXT_ID = 3;

  private Handshake() {}

  /**
   * Runs the handshake for {@code appId} with {@code token}; with no token (a cluster running
   * without authentication) sends nothing. A refusal is a REMOTE error ({@code unauthorized}).
   */
  public static void prove(Socket s, String addr, String appId, byte[] token, int timeoutMs)
      throws CrossdockException {
    if (token == null || token.length == 0) {
      return;
    }
    try {
      int before = s.getSoTimeout();
      s.setSoTimeout(timeoutMs);
      OutputStream out = s.getOutputStream();
      DataInputStream in = new DataInputStream(s.getInputStream());
      out.write(Codec.encodeFrame(new Message.Hello(), 1));
      out.flush();
      if (!(reply(in, addr, 1) instanceof Message.Challenge c)) {
        throw CrossdockException.protocol(addr, "no challenge in answer to Hello", null);
      }
      byte[] nonce = new byte[c.nonce().remaining()];
      c.nonce().duplicate().get(nonce);
      byte[] proof = Auth.proof(token, nonce, appId);
      out.write(Codec.encodeFrame(new Message.Authenticate(appId, ByteBuffer.wrap(proof)), 2));
      out.flush();
      if (!(reply(in, addr, 2) instanceof Message.Ok)) {
        throw CrossdockException.protocol(addr, "no Ok in answer to Authenticate", null);
      }
      s.setSoTimeout(before);
    } catch (CrossdockException e) {
      throw e; // a refusal, as the server worded it
    } catch (IOException e) {
      throw CrossdockException.transport(addr, "authentication handshake failed", e);
    }
  }

  private static Message reply(DataInputStream in, String addr, long id)
      throws IOException, CrossdockException {
    byte[] raw = new byte[FrameHeader.LEN];
    in.readFully(raw);
    FrameHeader h = FrameHeader.decode(raw, 0);
    Codec.checkHeader(h);
    if (h.bodyLen() > Codec.MAX_CONTROL_FRAME) {
      throw CrossdockException.protocol(addr, "handshake reply of " + h.bodyLen() + " bytes", null);
    }
    byte[] body = new byte[h.bodyLen()];
    in.readFully(body);
    Message m = Codec.decodeBody(h.kind(), ByteBuffer.wrap(body));
    if (m instanceof Message.Error e) {
      throw CrossdockException.remote(addr, e.code(), e.message());
    }
    if (h.requestId() != id) {
      throw CrossdockException.protocol(addr,
          "answer to request " + h.requestId() + " during the handshake, expected " + id, null);
    }
    return m;
  }
}
