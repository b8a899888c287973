//! Allocator tuning for a process that moves megabyte-sized buffers all day.
//!
//! glibc's defaults serve every allocation of 128 KiB or more with a fresh `mmap` and
//! give it back with `munmap` when freed, so each pushed batch and fetched chunk costs
//! page faults and the kernel zeroing fresh pages. Serving them from the heap instead
//! measured about 20% more push and fetch throughput (`crossdock bench push-fetch`,
//! docs/benchmarks-service.md). The arena count is capped so idle per-thread arenas cannot
//! inflate the resident set (a known failure of JVM shuffle servers on glibc), and the
//! heap keeps at most 128 MiB of free memory before trimming; after an application's or
//! shuffle's data is deleted every arena is trimmed ([`trim`], `crossdock_server::heap`).

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn tune() {
    const MIB: libc::c_int = 1 << 20;
    // SAFETY: mallopt only changes allocator parameters; it is called before any other
    // thread exists, and a rejected setting leaves glibc's default in place.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 * MIB);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * MIB);
        libc::mallopt(libc::M_ARENA_MAX, 4);
    }
}

/// Returns the free memory of every arena to the OS (`crossdock_server::heap`, called
/// after an application's or shuffle's data was deleted).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn trim() {
    // SAFETY: malloc_trim only releases free pages; it is thread-safe (it takes each
    // arena's lock in turn).
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn tune() {}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim() {}
