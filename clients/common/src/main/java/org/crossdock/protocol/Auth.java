package org.crossdock.protocol;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The proofs of the authentication handshake, computed as crates/proto/src/auth.rs computes them
 * (docs/security.md; pinned by testdata/protocol/auth.json):
 *
 * <pre>
 * token(app) = HMAC-SHA256(secret, "crossdock app token v1" 0x00 app_id)
 * proof      = HMAC-SHA256(key,    "crossdock auth v1" 0x00 nonce app_id)
 * </pre>
 *
 * An executor holds only its app's token (shipped with the shuffle handle); the cluster secret
 * never leaves the coordinator and the workers, so {@link #appToken} is here for the tests.
 */
public final class Auth {
  private static final byte[] TOKEN_LABEL =
      "crossdock app token v1\0".getBytes(StandardCharsets.UTF_8);
  private static final byte[] PROOF_LABEL =
      "crossdock auth v1\0".getBytes(StandardCharsets.UTF_8);

  private Auth() {}

  private static Mac mac(byte[] key) {
    try {
      Mac m = Mac.getInstance("HmacSHA256");
      m.init(new SecretKeySpec(key, "HmacSHA256"));
      return m;
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is part of every JDK", e);
    }
  }

  /** The token of {@code appId} under {@code secret}. */
  public static byte[] appToken(byte[] secret, String appId) {
    Mac m = mac(secret);
    m.update(TOKEN_LABEL);
    m.update(appId.getBytes(StandardCharsets.UTF_8));
    return m.doFinal();
  }

  /** The proof that answers {@code nonce} for {@code appId} with {@code key}. */
  public static byte[] proof(byte[] key, byte[] nonce, String appId) {
    Mac m = mac(key);
    m.update(PROOF_LABEL);
    m.update(nonce);
    m.update(appId.getBytes(StandardCharsets.UTF_8));
    return m.doFinal();
  }
}
