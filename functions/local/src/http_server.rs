//! The local HTTP server: axum's router on hyper, with what a server facing clients needs and
//! `axum::serve` does not set: a cap on connections, and on connections from one address; a
//! bound on header size (431 beyond it); a deadline for each request's headers, which also
//! closes idle keep-alive connections; a deadline for a client to read what it is sent; idle
//! connections closed at once when every slot is taken; and a drain at shutdown: requests
//! already being served are answered before the process ends.

use crate::proxies::{is_trusted, TrustedProxy};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use ops_api::ClientAddress;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_io_timeout::TimeoutStream;

/// Bytes of request line and headers a request may send.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// Time a client has to send a request's headers, and to start its next request on a
/// kept-alive connection.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Time the requests being served at shutdown have to finish before the server stops anyway.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What the server holds its clients to.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Connections served at once; more wait in the listen backlog.
    pub max: usize,
    /// Of them, from one address; more are closed at once. A trusted proxy's are not
    /// counted: its clients are many.
    pub per_address: usize,
    /// Time a client has to take what it is sent: a write that makes no progress for this
    /// long closes the connection, and with it the answer it holds in memory.
    pub write_timeout: Duration,
    pub trusted_proxies: Arc<[TrustedProxy]>,
}

/// The connections each address holds, and one address's hold on its count.
#[derive(Default)]
struct PerAddress(Mutex<HashMap<IpAddr, usize>>);

struct AddressHold {
    counts: Arc<PerAddress>,
    address: IpAddr,
}

impl PerAddress {
    fn hold(self: &Arc<Self>, address: IpAddr, limit: usize) -> Option<AddressHold> {
        let mut counts = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let held = counts.entry(address).or_default();
        if *held >= limit {
            return None;
        }
        *held += 1;
        Some(AddressHold {
            counts: self.clone(),
            address,
        })
    }
}

impl Drop for AddressHold {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(held) = counts.get_mut(&self.address) {
            *held -= 1;
            if *held == 0 {
                counts.remove(&self.address);
            }
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes, within `limits`. When every slot
/// is taken, the idle connections are closed (their clients reconnect when they next ask) and
/// the busy ones close after their answer, so a new client is not kept waiting by kept-alive
/// connections doing nothing. At shutdown it takes no more connections, closes the idle ones,
/// and waits (at most [`DRAIN_TIMEOUT`]) for each request being served to be answered.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let max_connections = limits.max.max(1);
    let slots = Arc::new(Semaphore::new(max_connections));
    let per_address = Arc::new(PerAddress::default());
    let (drain, _) = tokio::sync::watch::channel(());
    let (shed, _) = tokio::sync::watch::channel(());
    tokio::pin!(shutdown);
    loop {
        if slots.available_permits() == 0 {
            shed.send_replace(());
        }
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            _ = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, or a connection reset before it was taken: wait
                    // a moment instead of spinning, and go on serving.
                    tracing::warn!(%error, "could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let address = peer.ip().to_canonical();
        let address_hold = if is_trusted(address, &limits.trusted_proxies) {
            None
        } else {
            match per_address.hold(address, limits.per_address.max(1)) {
                Some(hold) => Some(hold),
                None => {
                    tracing::debug!(%peer, "closed: its address holds as many connections as one may");
                    continue;
                }
            }
        };
        let service = router.clone().layer(axum::Extension(ClientAddress(peer.ip())));
        let (mut draining, mut shedding) = (drain.subscribe(), shed.subscribe());
        let mut stream = TimeoutStream::new(stream);
        stream.set_write_timeout(Some(limits.write_timeout));
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(MAX_HEADER_BYTES);
            let connection = http
                .serve_connection(TokioIo::new(Box::pin(stream)), TowerToHyperService::new(service))
                .with_upgrades();
            tokio::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                // The request being served (if any) is answered; then the connection closes.
                _ = draining.changed() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
                _ = shedding.changed() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = served {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
            drop(address_hold);
            drop(slot);
        });
    }
    drop(listener);
    drain.send_replace(());
    let every_slot = u32::try_from(max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(DRAIN_TIMEOUT, slots.acquire_many(every_slot))
        .await
        .is_err()
    {
        tracing::warn!(
            timeout = ?DRAIN_TIMEOUT,
            "stopping with requests still being served; their clients see the connection close"
        );
    }
}
