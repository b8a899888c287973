//! The physical limits a run is compared against (`--baseline`): raw loopback TCP and
//! memcpy, measured on the same machine in the same run.

use std::io::{Read, Write};
use std::time::Instant;

use anyhow::{bail, Result};

/// Raw loopback TCP: one sender thread, one receiver thread, 1 MiB writes.
pub fn loopback_tcp_gbps(bytes: u64) -> Result<f64> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let receiver = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0u64;
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                return Ok(got);
            }
            got += n as u64;
        }
    });
    let buf = vec![7u8; 1 << 20];
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < bytes {
        let n = (bytes - sent).min(buf.len() as u64) as usize;
        s.write_all(&buf[..n])?;
        sent += n as u64;
    }
    drop(s);
    let got = receiver.join().expect("receiver thread")?;
    let secs = start.elapsed().as_secs_f64();
    if got != bytes {
        bail!("loopback baseline received {got} of {bytes} bytes");
    }
    Ok(bytes as f64 / secs / 1e9)
}

/// Single-thread memcpy of 64 MiB buffers.
pub fn memcpy_gbps() -> f64 {
    let src = vec![1u8; 64 << 20];
    let mut dst = vec![0u8; 64 << 20];
    let reps = 16;
    let start = Instant::now();
    for i in 0..reps {
        dst.copy_from_slice(&src);
        dst[i] = dst[i].wrapping_add(1);
        std::hint::black_box(&dst);
    }
    (reps * src.len()) as f64 / start.elapsed().as_secs_f64() / 1e9
}
