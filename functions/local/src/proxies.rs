//! Clients behind a reverse proxy. The failed-authentication limit counts per client address;
//! behind a proxy every connection comes from the proxy, so one client's flood of wrong keys
//! would lock every other client out with it. For a peer the operator names as a proxy
//! (`OPS_TRUSTED_PROXIES`), the address is the one `X-Forwarded-For` says it forwarded for:
//! the rightmost entry that is not itself a trusted proxy, since every entry to its left was
//! written by the client and may be forged. Without the setting, the header is ignored.

use axum::extract::{Request, State};
use ipnet::IpNet;
use ops_api::ClientAddress;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::Arc;

/// A proxy's address, or a network of them (`10.0.0.7`, `10.0.0.0/8`, `::1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrustedProxy(IpNet);

impl FromStr for TrustedProxy {
    type Err = String;

    fn from_str(text: &str) -> Result<TrustedProxy, String> {
        let text = text.trim();
        IpNet::from_str(text)
            .or_else(|_| IpAddr::from_str(text).map(IpNet::from))
            .map(TrustedProxy)
            .map_err(|_| format!("'{text}' is neither an IP address nor a network (10.0.0.0/8)"))
    }
}

/// An IPv4 client of a server listening on IPv6 arrives as `::ffff:a.b.c.d`: compared as the
/// IPv4 address it is.
pub fn is_trusted(address: IpAddr, trusted: &[TrustedProxy]) -> bool {
    let address = address.to_canonical();
    trusted.iter().any(|proxy| proxy.0.contains(&address))
}

/// The client a request from `peer` came from, given its `X-Forwarded-For` header values.
pub fn client_address<'a>(
    peer: IpAddr,
    forwarded_for: impl Iterator<Item = &'a str>,
    trusted: &[TrustedProxy],
) -> IpAddr {
    if !is_trusted(peer, trusted) {
        return peer;
    }
    let hops: Vec<&str> = forwarded_for.flat_map(|value| value.split(',')).collect();
    let mut client = peer;
    for hop in hops.iter().rev() {
        // An entry that is not an address ends what can be believed: the last proxy is the client.
        let Ok(address) = IpAddr::from_str(hop.trim()) else {
            return client;
        };
        client = address;
        if !is_trusted(address, trusted) {
            break;
        }
    }
    client
}

/// Middleware: a request's `ClientAddress` (the peer, as the server set it) becomes the client
/// it was forwarded for, when the peer is a trusted proxy.
pub async fn forwarded_client(State(trusted): State<Arc<[TrustedProxy]>>, mut request: Request) -> Request {
    let peer = request
        .extensions()
        .get::<ClientAddress>()
        .map(|ClientAddress(peer)| *peer);
    if let Some(peer) = peer {
        let forwarded = request.headers().get_all("x-forwarded-for");
        let values = forwarded.iter().filter_map(|value| value.to_str().ok());
        let client = client_address(peer, values, &trusted);
        request.extensions_mut().insert(ClientAddress(client));
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(list: &[&str]) -> Vec<TrustedProxy> {
        list.iter().map(|p| p.parse().unwrap()).collect()
    }

    fn client(peer: &str, header: &[&str], trusted: &[&str]) -> String {
        client_address(peer.parse().unwrap(), header.iter().copied(), &proxies(trusted)).to_string()
    }

    #[test]
    fn the_client_is_the_rightmost_address_no_trusted_proxy_owns() {
        // No proxy trusted, or a peer that is not one: the header is the client's to forge.
        assert_eq!(client("10.0.0.1", &["203.0.113.7"], &[]), "10.0.0.1");
        assert_eq!(client("192.0.2.1", &["203.0.113.7"], &["10.0.0.0/8"]), "192.0.2.1");
        // One proxy in front.
        assert_eq!(client("10.0.0.1", &["203.0.113.7"], &["10.0.0.1"]), "203.0.113.7");
        // A forged entry on the left is passed over; two proxies, one header or two.
        assert_eq!(
            client("10.0.0.1", &["198.51.100.9, 203.0.113.7"], &["10.0.0.0/8"]),
            "203.0.113.7"
        );
        assert_eq!(
            client("10.0.0.1", &["198.51.100.9, 203.0.113.7", "10.0.0.2"], &["10.0.0.0/8"]),
            "203.0.113.7"
        );
        // Every hop a proxy: the first of them. No header: the proxy itself.
        assert_eq!(client("10.0.0.1", &["10.0.0.3, 10.0.0.2"], &["10.0.0.0/8"]), "10.0.0.3");
        assert_eq!(client("10.0.0.1", &[], &["10.0.0.1"]), "10.0.0.1");
        // Garbage stops the walk at the last address believed.
        assert_eq!(client("10.0.0.1", &["203.0.113.7, unknown"], &["10.0.0.1"]), "10.0.0.1");
        assert_eq!(client("::1", &["2001:db8::5"], &["::1"]), "2001:db8::5");
        assert_eq!(
            client("::ffff:10.0.0.1", &["203.0.113.7"], &["10.0.0.0/8"]),
            "203.0.113.7"
        );
    }

    #[test]
    fn a_proxy_is_an_address_or_a_network() {
        assert!("10.0.0.7".parse::<TrustedProxy>().is_ok());
        assert!("10.0.0.0/8".parse::<TrustedProxy>().is_ok());
        assert!("::1".parse::<TrustedProxy>().is_ok());
        assert!("proxy.internal".parse::<TrustedProxy>().is_err());
    }
}
