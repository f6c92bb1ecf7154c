//! A deadline for a request's whole body, for a server that reads bodies off the network
//! (local mode; on Lambda, API Gateway hands the function a whole body). Without one, a client
//! that sends its headers and then a byte now and then holds a connection, and a request slot,
//! for as long as it likes: hyper's header deadline ends where the body starts.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use http_body::{Body as HttpBody, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// The error a body read past its deadline ends with; the extractors answer it 408.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyDeadlinePassed(pub Duration);

/// Middleware (`axum::middleware::map_request_with_state`): the request's body must arrive
/// whole within `within` of its headers. A request without a body is left as it is.
pub async fn body_deadline(State(within): State<Duration>, request: Request) -> Request {
    if request.body().is_end_stream() {
        return request;
    }
    request.map(|body| {
        Body::new(Deadline {
            body,
            within,
            expires: Box::pin(tokio::time::sleep(within)),
        })
    })
}

struct Deadline {
    body: Body,
    within: Duration,
    expires: Pin<Box<tokio::time::Sleep>>,
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        match this.expires.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(BodyDeadlinePassed(this.within).into()))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
