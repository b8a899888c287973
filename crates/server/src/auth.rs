//! What one connection has proved, and what it may therefore ask.
//!
//! A connection starts with nothing. `Hello` gives it a nonce; each `Authenticate`
//! answering it with an app's token adds that app, and one answering it with the
//! cluster secret makes the connection the cluster's (the coordinator or a worker),
//! which may ask anything. A successful `RegisterApp` adds its app too (the
//! coordinator has just handed that connection the token). Everything else is checked
//! against [`Message::scope`] before it is handled; a refusal is an `unauthorized`
//! error and nothing is read or changed. With authentication off (no secret) every
//! request passes, as before authentication existed.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use crossdock_proto::auth::{new_nonce, verify, ClusterSecret, Scope};
use crossdock_proto::{ErrorCode, Message};

use crate::error::ServerError;

/// Apps one connection may authenticate for (a driver registering many apps on one
/// connection is the most a real client does; the bound keeps the set small).
pub const MAX_APPS_PER_CONNECTION: usize = 1024;

/// The authentication state of one connection.
pub struct Access {
    secret: Option<Arc<ClusterSecret>>,
    nonce: Option<Bytes>,
    cluster: bool,
    apps: HashSet<String>,
}

impl Access {
    /// A new connection's state; `secret` is `None` when authentication is off.
    pub fn new(secret: Option<Arc<ClusterSecret>>) -> Access {
        Access {
            secret,
            nonce: None,
            cluster: false,
            apps: HashSet::new(),
        }
    }

    /// Answers `Hello`: the connection's nonce (the same one if asked again).
    pub fn hello(&mut self) -> Message {
        let nonce = self.nonce.get_or_insert_with(new_nonce).clone();
        Message::Challenge { nonce }
    }

    /// Checks an `Authenticate` and, if its proof holds, grants what it proves.
    pub fn authenticate(&mut self, app_id: &str, proof: &[u8]) -> Result<Message, ServerError> {
        let Some(secret) = &self.secret else {
            return Ok(Message::Ok); // authentication is off: nothing to prove
        };
        let Some(nonce) = &self.nonce else {
            return Err(unauthorized(
                "Authenticate before Hello: ask for a challenge first",
            ));
        };
        if !verify(&secret.key_for(app_id), nonce, app_id, proof) {
            let whose = if app_id.is_empty() {
                "the cluster secret".to_string()
            } else {
                format!("the token of app '{app_id}'")
            };
            return Err(unauthorized(&format!("wrong proof of {whose}")));
        }
        if app_id.is_empty() {
            self.cluster = true;
            Ok(Message::Ok)
        } else {
            self.grant(app_id).map(|()| Message::Ok)
        }
    }

    /// Adds an app this connection may act for (it registered the app).
    pub fn grant(&mut self, app_id: &str) -> Result<(), ServerError> {
        if self.secret.is_none() || self.cluster || self.apps.contains(app_id) {
            return Ok(());
        }
        if self.apps.len() >= MAX_APPS_PER_CONNECTION {
            return Err(ServerError::limit(format!(
                "a connection may act for at most {MAX_APPS_PER_CONNECTION} apps; open another"
            )));
        }
        self.apps.insert(app_id.to_string());
        Ok(())
    }

    /// True if this connection may act for `app_id` (or authentication is off).
    pub fn owns(&self, app_id: &str) -> bool {
        self.secret.is_none() || self.cluster || self.apps.contains(app_id)
    }

    /// True if this connection proved the cluster secret (or authentication is off).
    pub fn is_cluster(&self) -> bool {
        self.secret.is_none() || self.cluster
    }

    /// Refuses a request this connection may not make. `RegisterApp` always passes
    /// here: whether it may take an app id already registered is decided with the
    /// registry's lock held (see [`Access::owns`]).
    pub fn check(&self, msg: &Message) -> Result<(), ServerError> {
        match msg.scope() {
            Scope::Handshake | Scope::Register(_) => Ok(()),
            Scope::App(app_id) => self.check_app(app_id),
            Scope::Authenticated if self.is_cluster() || !self.apps.is_empty() => Ok(()),
            Scope::Authenticated => Err(unauthorized(&format!(
                "{:?} needs an authenticated connection",
                msg.kind()
            ))),
            Scope::Cluster if self.is_cluster() => Ok(()),
            Scope::Cluster => Err(unauthorized(&format!(
                "{:?} is taken only from the coordinator and the workers (the cluster secret)",
                msg.kind()
            ))),
        }
    }

    /// Refuses a request about `app_id` unless this connection may act for it.
    pub fn check_app(&self, app_id: &str) -> Result<(), ServerError> {
        if self.owns(app_id) {
            Ok(())
        } else {
            Err(unauthorized(&format!(
                "this connection has not authenticated for app '{app_id}' \
                 (Hello, then Authenticate with the app's token)"
            )))
        }
    }
}

/// An `unauthorized` refusal.
pub fn unauthorized(message: &str) -> ServerError {
    ServerError {
        code: ErrorCode::Unauthorized,
        message: message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossdock_proto::auth::proof;

    fn secret() -> Arc<ClusterSecret> {
        Arc::new(ClusterSecret::from_bytes(&[7; 32]).unwrap())
    }

    fn nonce(a: &mut Access) -> Bytes {
        match a.hello() {
            Message::Challenge { nonce } => nonce,
            m => panic!("{m:?}"),
        }
    }

    fn fetch(app: &str) -> Message {
        Message::Fetch {
            app_id: app.into(),
            shuffle_id: 0,
            partition: 0,
            start_map: 0,
            end_map: 1,
            resume_after: None,
            run_bytes: Default::default(),
            end_batch_seq: Default::default(),
            expected_attempt: crossdock_proto::Appended(None),
            flags: crossdock_proto::Appended(None),
        }
    }

    fn delete(app: &str) -> Message {
        Message::DeleteApp {
            app_id: app.into(),
            everywhere: true,
        }
    }

    #[test]
    fn off_lets_everything_through() {
        let mut a = Access::new(None);
        assert!(a.check(&fetch("x")).is_ok());
        assert!(a.check(&delete("x")).is_ok());
        assert_eq!(a.authenticate("x", b"anything").unwrap(), Message::Ok);
    }

    #[test]
    fn an_unauthenticated_connection_may_only_register() {
        let a = Access::new(Some(secret()));
        let reg = Message::RegisterApp {
            app_id: "x".into(),
            lease_ms: 1000,
            stored_quota: Default::default(),
            memory_share_ppm: Default::default(),
        };
        assert!(a.check(&reg).is_ok());
        for m in [fetch("x"), delete("x"), Message::GetWorkerStats] {
            let err = a.check(&m).unwrap_err();
            assert_eq!(err.code, ErrorCode::Unauthorized, "{m:?}");
        }
    }

    #[test]
    fn an_app_token_grants_its_app_only() {
        let s = secret();
        let mut a = Access::new(Some(s.clone()));
        assert!(a.authenticate("x", &[0; 32]).is_err(), "before Hello");
        let n = nonce(&mut a);
        assert_eq!(nonce(&mut a), n, "one nonce per connection");
        let good = proof(&s.app_token("x"), &n, "x");
        assert!(a.authenticate("y", &good).is_err(), "x's proof for y");
        assert!(a.authenticate("x", &good[..16]).is_err());
        a.authenticate("x", &good).unwrap();
        assert!(a.check(&fetch("x")).is_ok());
        assert!(a.check(&Message::GetWorkerStats).is_ok());
        assert_eq!(
            a.check(&fetch("y")).unwrap_err().code,
            ErrorCode::Unauthorized
        );
        assert_eq!(
            a.check(&delete("x")).unwrap_err().code,
            ErrorCode::Unauthorized
        );
    }

    #[test]
    fn the_cluster_secret_grants_everything() {
        let s = secret();
        let mut a = Access::new(Some(s.clone()));
        let n = nonce(&mut a);
        // An app's token is not the cluster's key.
        let app_key_as_cluster = proof(&s.app_token("x"), &n, "");
        assert!(a.authenticate("", &app_key_as_cluster).is_err());
        a.authenticate("", &proof(s.as_bytes(), &n, "")).unwrap();
        assert!(a.check(&delete("x")).is_ok());
        assert!(a.check(&fetch("y")).is_ok());
    }

    #[test]
    fn grants_are_bounded() {
        let mut a = Access::new(Some(secret()));
        for i in 0..MAX_APPS_PER_CONNECTION {
            a.grant(&format!("app-{i}")).unwrap();
        }
        let err = a.grant("one-more").unwrap_err();
        assert_eq!(err.code, ErrorCode::LimitExceeded);
        assert!(a.grant("app-0").is_ok(), "an app already granted");
    }
}
