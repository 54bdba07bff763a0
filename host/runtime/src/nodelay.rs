//! `TCP_NODELAY` on this process's connections to the ZooKeeper servers.
//!
//! zookeeper-client writes a request as soon as it is made, but leaves Nagle's algorithm on: a
//! request written while an earlier one is still unacknowledged waits for that acknowledgement,
//! which the server sends with its reply. So the second request of a `znode.pipeline` would go
//! out a round trip after the first, and a pipeline would cost what the calls one by one cost.
//! The client does not expose its socket, so the host finds its connections by their peer
//! address (a TCP socket of this process connected to one of the servers) and sets the option on
//! them: when a session is opened and whenever it reconnects.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, ToSocketAddrs};

/// The socket addresses of `hosts` (`host:port[,host:port…]`, any `tcp://` or `tcp+tls://`
/// scheme dropped); names that do not resolve are left out.
pub(crate) fn servers(hosts: &str) -> Vec<SocketAddr> {
    hosts
        .split(',')
        .map(|host| host.rsplit_once("://").map_or(host, |(_, rest)| rest).trim())
        .filter_map(|host| host.to_socket_addrs().ok())
        .flatten()
        .collect()
}

/// Sets `TCP_NODELAY` on every TCP socket of this process whose peer is one of `servers`;
/// returns how many it set.
pub(crate) fn apply(servers: &[SocketAddr]) -> usize {
    if servers.is_empty() {
        return 0;
    }
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else { return 0 };
    let mut set = 0;
    for entry in fds.flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        if peer(fd).is_some_and(|peer| servers.contains(&peer)) && no_delay(fd) {
            set += 1;
        }
    }
    set
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
            let peer =
                SocketAddrV6::new(ip, u16::from_be(addr.sin6_port), addr.sin6_flowinfo, addr.sin6_scope_id);
            // An IPv4 server reached over a dual-stack socket.
            Some(match ip.to_ipv4_mapped() {
                Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, peer.port())),
                None => SocketAddr::V6(peer),
            })
        }
        _ => None,
    }
}

fn no_delay(fd: i32) -> bool {
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

    #[test]
    fn finds_this_process_connections_to_a_server_and_sets_the_option() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let stream = std::net::TcpStream::connect(server).unwrap();
        assert!(!stream.nodelay().unwrap());
        let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let unrelated = std::net::TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert_eq!(apply(&servers(&format!("tcp://{server}"))), 1);
        assert!(stream.nodelay().unwrap(), "the connection to the server");
        assert!(!unrelated.nodelay().unwrap(), "a connection elsewhere is left alone");
        assert_eq!(servers("127.0.0.1:2181,tcp+tls://127.0.0.1:2182").len(), 2);
    }
}
