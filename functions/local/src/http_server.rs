//! The local HTTP server: axum's router on hyper, with what a server facing clients needs and
//! `axum::serve` does not set: a cap on connections, a bound on header size (431 beyond it),
//! a deadline for each request's headers, which also closes idle keep-alive connections, and a
//! drain at shutdown: requests already being served are answered before the process ends.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use ops_api::ClientAddress;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Bytes of request line and headers a request may send.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// Time a client has to send a request's headers, and to start its next request on a
/// kept-alive connection.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Time the requests being served at shutdown have to finish before the server stops anyway.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` until `shutdown` completes, at most `max_connections` at
/// once (more wait in the listen backlog). Then it takes no more connections, closes the idle
/// ones, and waits (at most [`DRAIN_TIMEOUT`]) for each request being served to be answered.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    max_connections: usize,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let max_connections = max_connections.max(1);
    let slots = Arc::new(Semaphore::new(max_connections));
    let (drain, draining) = tokio::sync::watch::channel(());
    tokio::pin!(shutdown);
    loop {
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
        let service = router.clone().layer(axum::Extension(ClientAddress(peer.ip())));
        let mut draining = draining.clone();
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(MAX_HEADER_BYTES);
            let connection = http
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                .with_upgrades();
            tokio::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                _ = draining.changed() => {
                    // The request being served (if any) is answered; then the connection closes.
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = served {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
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
