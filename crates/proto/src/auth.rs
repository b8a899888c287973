//! What authenticates a connection, computed the same way by every implementation
//! (the Java client's `Auth` class; the shared vectors in `testdata/protocol/auth.json`).
//!
//! The cluster secret is known to the coordinator and the workers only. An app's token
//! is derived from it and the app id, so any worker can check a token without asking
//! the coordinator, and the coordinator hands it out once, in its answer to
//! `RegisterApp`. Neither crosses the network afterwards: a connection asks for a
//! challenge (`Hello` → `Challenge`, a fresh nonce per connection) and answers it with
//! `Authenticate`, an HMAC of the nonce keyed with the token (or the secret), so a
//! recorded handshake is worth nothing on another connection.
//!
//! ```text
//! token(app) = HMAC-SHA256(secret, "crossdock app token v1" 0x00 app_id)
//! proof      = HMAC-SHA256(key,    "crossdock auth v1" 0x00 nonce app_id)
//! key        = token(app_id), or the secret itself when app_id is empty
//! ```

use std::fmt;

use bytes::Bytes;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::message::Message;

/// Bytes of a connection's challenge nonce.
pub const NONCE_LEN: usize = 16;
/// Bytes of an app token.
pub const TOKEN_LEN: usize = 32;
/// Bytes of a proof.
pub const PROOF_LEN: usize = 32;
/// The shortest cluster secret accepted (256 bits).
pub const MIN_SECRET_LEN: usize = 32;

const TOKEN_LABEL: &[u8] = b"crossdock app token v1\0";
const PROOF_LABEL: &[u8] = b"crossdock auth v1\0";

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8]) -> HmacSha256 {
    HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length")
}

/// The secret the coordinator and the workers share. Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterSecret(Vec<u8>);

impl ClusterSecret {
    /// A secret from a file's contents: surrounding white space (a trailing newline) is
    /// not part of it, and it must be at least [`MIN_SECRET_LEN`] bytes.
    pub fn from_bytes(raw: &[u8]) -> Result<ClusterSecret, String> {
        let start = raw.iter().position(|b| !b.is_ascii_whitespace());
        let end = raw.iter().rposition(|b| !b.is_ascii_whitespace());
        let bytes = match (start, end) {
            (Some(s), Some(e)) => &raw[s..=e],
            _ => &[][..],
        };
        if bytes.len() < MIN_SECRET_LEN {
            return Err(format!(
                "the cluster secret has {} bytes; at least {MIN_SECRET_LEN} are needed \
                 (e.g. `head -c 32 /dev/urandom | base64 > secret`)",
                bytes.len()
            ));
        }
        Ok(ClusterSecret(bytes.to_vec()))
    }

    /// A new random secret (a standalone process whose coordinator and workers share
    /// it in memory).
    pub fn generate() -> ClusterSecret {
        let mut b = vec![0u8; MIN_SECRET_LEN];
        getrandom::fill(&mut b).expect("the OS random source works");
        ClusterSecret(b)
    }

    /// The secret's bytes (the key of a cluster peer's proof).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The token of `app_id`.
    pub fn app_token(&self, app_id: &str) -> Bytes {
        let mut m = mac(&self.0);
        m.update(TOKEN_LABEL);
        m.update(app_id.as_bytes());
        Bytes::copy_from_slice(&m.finalize().into_bytes())
    }

    /// The key a proof for `app_id` is made with: the app's token, or the secret itself
    /// for the cluster (an empty `app_id`).
    pub fn key_for(&self, app_id: &str) -> Bytes {
        if app_id.is_empty() {
            Bytes::copy_from_slice(&self.0)
        } else {
            self.app_token(app_id)
        }
    }
}

impl fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClusterSecret({} bytes)", self.0.len())
    }
}

/// A fresh challenge nonce.
pub fn new_nonce() -> Bytes {
    let mut b = [0u8; NONCE_LEN];
    getrandom::fill(&mut b).expect("the OS random source works");
    Bytes::copy_from_slice(&b)
}

fn proof_mac(key: &[u8], nonce: &[u8], app_id: &str) -> HmacSha256 {
    let mut m = mac(key);
    m.update(PROOF_LABEL);
    m.update(nonce);
    m.update(app_id.as_bytes());
    m
}

/// The proof that answers `nonce` for `app_id` with `key`.
pub fn proof(key: &[u8], nonce: &[u8], app_id: &str) -> Bytes {
    Bytes::copy_from_slice(&proof_mac(key, nonce, app_id).finalize().into_bytes())
}

/// True if `proof` answers `nonce` for `app_id` with `key` (compared in constant time).
pub fn verify(key: &[u8], nonce: &[u8], app_id: &str, proof: &[u8]) -> bool {
    proof_mac(key, nonce, app_id).verify_slice(proof).is_ok()
}

/// Who may send a message, when authentication is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// The handshake itself (`Hello`, `Authenticate`): anyone.
    Handshake,
    /// `RegisterApp`: anyone, but an app id already registered only by a connection
    /// authenticated for it (so nobody obtains another app's token).
    Register(&'a str),
    /// About one app's shuffles: a connection authenticated for that app, or the cluster.
    App(&'a str),
    /// Harmless to any authenticated connection (a worker failure report, statistics).
    Authenticated,
    /// The coordinator's and workers' own messages: the cluster only.
    Cluster,
}

impl Message {
    /// Who may send this message (a pushed batch's app is in its header).
    pub fn scope(&self) -> Scope<'_> {
        use Message::*;
        match self {
            Hello | Authenticate { .. } => Scope::Handshake,
            RegisterApp { app_id, .. } => Scope::Register(app_id),
            RenewLease { app_id }
            | UnregisterApp { app_id }
            | RegisterShuffle { app_id, .. }
            | CommitMap { app_id, .. }
            | UnregisterShuffle { app_id, .. }
            | GetShuffleStatus { app_id, .. }
            | Fetch { app_id, .. } => Scope::App(app_id),
            PushBatch { header, .. } => Scope::App(&header.app_id),
            ReportWorkerFailure { .. } | GetWorkerStats => Scope::Authenticated,
            // Control between coordinator and workers, and every answer (a server never
            // takes an answer as a request; those are refused as such after this check).
            _ => Scope::Cluster,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_trimmed_and_must_be_long_enough() {
        let s = ClusterSecret::from_bytes(b"  0123456789abcdef0123456789abcdef\n").unwrap();
        assert_eq!(s.as_bytes(), b"0123456789abcdef0123456789abcdef");
        let err = ClusterSecret::from_bytes(b"short\n").unwrap_err();
        assert!(err.contains("5 bytes"), "{err}");
        assert!(ClusterSecret::from_bytes(b" \n ").is_err());
        assert_eq!(format!("{s:?}"), "ClusterSecret(32 bytes)");
    }

    #[test]
    fn tokens_differ_per_app_and_per_secret() {
        let a = ClusterSecret::from_bytes(&[1; 32]).unwrap();
        let b = ClusterSecret::from_bytes(&[2; 32]).unwrap();
        assert_eq!(a.app_token("x").len(), TOKEN_LEN);
        assert_eq!(a.app_token("x"), a.app_token("x"));
        assert_ne!(a.app_token("x"), a.app_token("y"));
        assert_ne!(a.app_token("x"), b.app_token("x"));
        assert_eq!(a.key_for(""), Bytes::copy_from_slice(&[1; 32]));
    }

    #[test]
    fn a_proof_holds_only_for_its_nonce_app_and_key() {
        let s = ClusterSecret::generate();
        let key = s.key_for("app-1");
        let n1 = new_nonce();
        let n2 = new_nonce();
        assert_ne!(n1, n2);
        let p = proof(&key, &n1, "app-1");
        assert_eq!(p.len(), PROOF_LEN);
        assert!(verify(&key, &n1, "app-1", &p));
        assert!(
            !verify(&key, &n2, "app-1", &p),
            "replayed on another connection"
        );
        assert!(!verify(&key, &n1, "app-2", &p), "another app");
        assert!(
            !verify(&s.key_for("app-2"), &n1, "app-1", &p),
            "another key"
        );
        assert!(!verify(&key, &n1, "app-1", &p[..31]), "truncated");
    }

    #[test]
    fn shared_vectors_hold() {
        let text = include_str!("../../../testdata/protocol/auth.json");
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        let hex = |k: &str| crate::message::hex_bytes::from_hex(v[k].as_str().unwrap()).unwrap();
        let secret = ClusterSecret::from_bytes(&hex("secret")).unwrap();
        let app = v["app_id"].as_str().unwrap();
        assert_eq!(secret.app_token(app).as_ref(), &hex("token")[..]);
        let nonce = hex("nonce");
        assert_eq!(
            proof(&hex("token"), &nonce, app).as_ref(),
            &hex("app_proof")[..]
        );
        assert_eq!(
            proof(secret.as_bytes(), &nonce, "").as_ref(),
            &hex("cluster_proof")[..]
        );
    }
}
