//! The cluster a run measures when no `--coordinator` is given: a `crossdock standalone`
//! child process (so the workers' resident set is measured apart from the load
//! generator), with TLS on certificates made for it when asked.

use std::process::{Child, Command};

use anyhow::{Context, Result};
use crossdock_client::tls::TlsClient;

use super::PushFetchArgs;

/// A `crossdock standalone` child process, stopped with SIGTERM when dropped.
pub struct Embedded {
    child: Child,
    pub addr: String,
    _dir: tempfile::TempDir,
    /// The certificates of a cluster with TLS.
    _certs: Option<tempfile::TempDir>,
}

impl Embedded {
    /// An embedded cluster with TLS, on a certificate authority and certificate made
    /// for it.
    pub fn start_tls(a: &PushFetchArgs) -> Result<(Embedded, TlsClient)> {
        let certs = tempfile::Builder::new()
            .prefix("crossdock-bench-tls-")
            .tempdir()?;
        let files = crate::tls::generate(certs.path(), &["127.0.0.1".to_string()])?;
        let client = crate::tls::client(&files.ca)?;
        let mut e = Embedded::start(a, Some(&files), true)?;
        e._certs = Some(certs);
        Ok((e, client))
    }

    /// An embedded cluster; `zero_copy` false turns the workers' `sendfile` fetches off.
    pub fn start(
        a: &PushFetchArgs,
        tls: Option<&crate::tls::CertFiles>,
        zero_copy: bool,
    ) -> Result<Embedded> {
        let dir = tempfile::Builder::new()
            .prefix("crossdock-bench-")
            .tempdir()?;
        let exe = std::env::current_exe()?;
        let mut cmd = Command::new(exe);
        cmd.args([
            "standalone",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "off",
        ])
        .args(["--workers", &a.workers.to_string(), "--memory", &a.memory])
        .args(["--replication", &a.replication.to_string()])
        .args([
            "--zero-copy-fetch",
            if zero_copy { "true" } else { "false" },
        ])
        .args(["--durability", &a.durability])
        .args(
            a.object_store
                .iter()
                .flat_map(|u| ["--object-store", u.as_str()]),
        )
        .args(
            a.disk_quota
                .iter()
                .flat_map(|q| ["--disk-quota", q.as_str()]),
        )
        .arg("--data-dir")
        .arg(dir.path())
        .args(tls.iter().flat_map(|f| {
            [
                ("--tls-cert", &f.cert),
                ("--tls-key", &f.key),
                ("--tls-ca", &f.ca),
            ]
            .into_iter()
            .flat_map(|(flag, path)| [std::ffi::OsStr::new(flag), path.as_os_str()])
        }));
        let (child, addr) =
            super::child::spawn_announcing(cmd, "crossdock standalone listening on ")
                .context("starting the embedded crossdock standalone")?;
        Ok(Embedded {
            child,
            addr,
            _dir: dir,
            _certs: None,
        })
    }
}

impl Embedded {
    /// CPU time (user + system, seconds) the cluster's process has used so far, from
    /// `/proc` (in clock ticks of 1/100 s, Linux's `USER_HZ`); `None` where it cannot
    /// be read.
    pub fn cpu_secs(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        // Fields after the command name (which may hold spaces) in parentheses.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split(' ').collect();
        // utime and stime are fields 14 and 15 of the whole line: 12 and 13 here.
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(ticks as f64 / 100.0)
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        super::child::stop(std::slice::from_mut(&mut self.child));
    }
}
