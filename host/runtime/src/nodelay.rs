//! `TCP_NODELAY` on this process's connections to the ZooKeeper servers.
//!
//! zookeeper-client writes a request as soon as it is made, but leaves Nagle's algorithm on: a
//! request written while an earlier one is still unacknowledged waits for that acknowledgement,
//! which the server sends with its reply. So the second request of a `znode.pipeline` would go
//! out a round trip after the first, and a pipeline would cost what the calls one by one cost.
//! The client does not expose its socket, so the host finds its connections by their peer
//! address (a TCP socket of this process connected to one of the servers) and sets the option on
//! them: when a session is opened and whenever it reconnects (the names resolved again then).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// The socket addresses of `hosts` (`host[:port][,host[:port]…]`, ZooKeeper's port 2181 when
/// none is given, any `tcp://` or `tcp+tls://` scheme dropped), resolved now; names that do not
/// resolve are left out.
pub async fn servers(hosts: &str) -> Vec<SocketAddr> {
    let mut found = Vec::new();
    for host in hosts.split(',') {
        let host = host.rsplit_once("://").map_or(host, |(_, rest)| rest).trim();
        let with_port = match host.rsplit_once(':') {
            // `[v6]` alone, or a v6 address without brackets (no port can follow).
            _ if host.starts_with('[') && host.ends_with(']') => format!("{host}:2181"),
            Some((name, _)) if !name.contains(':') || name.ends_with(']') => host.to_string(),
            Some(_) => format!("[{host}]:2181"),
            None => format!("{host}:2181"),
        };
        if let Ok(addrs) = tokio::net::lookup_host(with_port).await {
            found.extend(addrs);
        }
    }
    found
}

/// Sets `TCP_NODELAY` on every TCP socket of this process whose peer is one of `servers`;
/// returns how many it set.
pub(crate) fn apply(servers: &[SocketAddr]) -> usize {
    sockets_to(servers).into_iter().filter(|fd| set_nodelay(*fd)).count()
}

/// This process's sockets (their descriptors) connected to one of `servers`.
pub fn sockets_to(servers: &[SocketAddr]) -> Vec<i32> {
    if servers.is_empty() {
        return Vec::new();
    }
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else { return Vec::new() };
    let server = |peer: SocketAddr| {
        servers.iter().any(|s| s.ip().to_canonical() == peer.ip().to_canonical() && s.port() == peer.port())
    };
    fds.flatten()
        .filter_map(|entry| entry.file_name().to_string_lossy().parse::<i32>().ok())
        .filter(|fd| peer(*fd).is_some_and(server))
        .collect()
}

/// The peer of socket `fd`, if it is a connected IPv4 or IPv6 socket.
fn peer(fd: i32) -> Option<SocketAddr> {
    // SAFETY: getpeername writes at most `len` bytes into the storage it is given; a descriptor
    // that is not a socket (or was closed meanwhile) is an error, not undefined behaviour.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let done = unsafe { libc::getpeername(fd, &mut storage as *mut _ as *mut libc::sockaddr, &mut len) };
    if done != 0 {
        return None;
    }
    match storage.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let addr = unsafe { *(&storage as *const _ as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(addr.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let addr = unsafe { *(&storage as *const _ as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(addr.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(addr.sin6_port), 0, 0)))
        }
        _ => None,
    }
}

/// Sets `TCP_NODELAY` on socket `fd`; whether it could.
pub fn set_nodelay(fd: i32) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: a plain setsockopt with an int option; errors are returned, not undefined.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            &on as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn finds_this_process_connections_to_a_server_and_sets_the_option() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let stream = std::net::TcpStream::connect(server).unwrap();
        assert!(!stream.nodelay().unwrap());
        let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let unrelated = std::net::TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert_eq!(apply(&servers(&format!("tcp://{server}")).await), 1);
        assert!(stream.nodelay().unwrap(), "the connection to the server");
        assert!(!unrelated.nodelay().unwrap(), "a connection elsewhere is left alone");
        assert_eq!(
            servers("127.0.0.1:2181,tcp+tls://127.0.0.1:2182,127.0.0.1,[::1]:2183,::1").await,
            ["127.0.0.1:2181", "127.0.0.1:2182", "127.0.0.1:2181", "[::1]:2183", "[::1]:2181"]
                .map(|a| a.parse::<SocketAddr>().unwrap())
        );
    }
}
