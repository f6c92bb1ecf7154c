//! The local HTTP server: axum's router on hyper, with what a server facing clients needs and
//! `axum::serve` does not set: a cap on connections, a bound on header size (431 beyond it),
//! and a deadline for each request's headers, which also closes idle keep-alive connections.

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

/// Serves `router` on `listener` until `shutdown` completes, at most `max_connections` at
/// once (more wait in the listen backlog).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    max_connections: usize,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(max_connections.max(1)));
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            _ = &mut shutdown => return,
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
            _ = &mut shutdown => return,
        };
        let service = router
            .clone()
            .layer(axum::Extension(ClientAddress(peer.ip().to_string())));
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(MAX_HEADER_BYTES);
            let served = http
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                .with_upgrades()
                .await;
            if let Err(error) = served {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
            drop(slot);
        });
    }
}
