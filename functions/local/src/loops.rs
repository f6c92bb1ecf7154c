//! Local mode runs each trigger in a loop of its own, as each is a function of its own in the
//! cloud: a webhook receiver that hangs holds up webhook sends, never submissions, status
//! polls or the other customers' payouts.

use futures_util::future::BoxFuture;
use std::fmt::Display;
use std::future::Future;
use std::time::Duration;
use tokio::task::JoinSet;

/// How long a loop rests after a round that found nothing to do (or failed).
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// One round of one trigger; returns how many items it handled.
pub type Step = Box<dyn Fn() -> BoxFuture<'static, Result<usize, String>> + Send + Sync>;

/// A step that runs `round` on its own clone of `state`.
pub fn step<S, F, Fut, E>(state: S, round: F) -> Step
where
    S: Clone + Send + Sync + 'static,
    F: Fn(S) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<usize, E>> + Send + 'static,
    E: Display,
{
    Box::new(move || {
        let round = round(state.clone());
        Box::pin(async move { round.await.map_err(|error| error.to_string()) })
    })
}

/// Runs every step in its own loop until dropped (dropping aborts them all).
pub async fn run(steps: Vec<(&'static str, Step)>) {
    let mut loops = JoinSet::new();
    for (trigger, step) in steps {
        loops.spawn(async move {
            loop {
                match step().await {
                    Ok(0) => tokio::time::sleep(IDLE_WAIT).await,
                    Ok(_) => {}
                    Err(error) => {
                        tracing::error!(trigger, %error, "trigger round failed");
                        tokio::time::sleep(IDLE_WAIT).await;
                    }
                }
            }
        });
    }
    while loops.join_next().await.is_some() {}
}
