//! Addresses as the services and clients write them: `host:port`, `[v6]:port`.

/// The host part of `host:port` (`[v6]:port` gives `v6`; an address without a port is
/// all host). What a TLS client checks a server's certificate against, and the name of a
/// worker's machine when it was given none.
pub fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn the_host_of_an_address_drops_its_port_and_brackets() {
        assert_eq!(host_of("10.0.0.7:7338"), "10.0.0.7");
        assert_eq!(host_of("node-3.example:1"), "node-3.example");
        assert_eq!(host_of("[::1]:7338"), "::1");
        assert_eq!(host_of("no-port"), "no-port");
    }
}
