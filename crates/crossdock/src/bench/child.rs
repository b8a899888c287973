//! The crossdock processes a benchmark starts: started with their log quiet, known by the
//! address they print, stopped with SIGTERM (then killed if they linger).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Starts `cmd` and returns it with the address it prints after `prefix` (the first word
/// after it). The rest of its output is drained in the background.
pub fn spawn_announcing(mut cmd: Command, prefix: &str) -> Result<(Child, String)> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .env("CROSSDOCK_LOG", "warn")
        .spawn()
        .context("starting a crossdock process")?;
    let stdout = child.stdout.take().expect("piped");
    let mut lines = BufReader::new(stdout).lines();
    let addr = loop {
        let line = match lines.next() {
            Some(Ok(line)) => line,
            Some(Err(e)) => {
                stop(std::slice::from_mut(&mut child));
                return Err(e.into());
            }
            None => {
                stop(std::slice::from_mut(&mut child));
                bail!("a crossdock process exited before printing its address");
            }
        };
        if let Some(rest) = line.strip_prefix(prefix) {
            break rest.split_whitespace().next().unwrap_or("").to_string();
        }
    };
    std::thread::spawn(move || for _ in lines.by_ref() {});
    Ok((child, addr))
}

/// Sends SIGTERM to every child, waits up to 5 s for them, then kills what is left.
pub fn stop(children: &mut [Child]) {
    for c in children.iter() {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    for c in children.iter_mut() {
        while Instant::now() < deadline {
            if let Ok(Some(_)) = c.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
}
