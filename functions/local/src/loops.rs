//! Local mode runs each trigger in a loop of its own, as each is a function of its own in the
//! cloud: a webhook receiver that hangs holds up webhook sends, never submissions, status
//! polls or the other customers' payouts.

use futures_util::future::BoxFuture;
use std::fmt::Display;
use std::future::Future;
use std::time::Duration;
use tokio::task::JoinSet;

/// One trigger's loop: a round, and how long to rest after a round that found nothing to do
/// (or failed).
pub struct Trigger {
    name: &'static str,
    idle: Duration,
    round: Box<dyn Fn() -> BoxFuture<'static, Result<usize, String>> + Send + Sync>,
}

/// A trigger whose round runs `round` on its own clone of `state` and returns how many items
/// it handled.
pub fn trigger<S, F, Fut, E>(name: &'static str, idle: Duration, state: S, round: F) -> Trigger
where
    S: Clone + Send + Sync + 'static,
    F: Fn(S) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<usize, E>> + Send + 'static,
    E: Display,
{
    Trigger {
        name,
        idle,
        round: Box::new(move || {
            let round = round(state.clone());
            Box::pin(async move { round.await.map_err(|error| error.to_string()) })
        }),
    }
}

/// Runs every trigger in its own loop until dropped (dropping aborts them all).
pub async fn run(triggers: Vec<Trigger>) {
    let mut loops = JoinSet::new();
    for trigger in triggers {
        loops.spawn(async move {
            loop {
                match (trigger.round)().await {
                    Ok(0) => tokio::time::sleep(trigger.idle).await,
                    Ok(_) => {}
                    Err(error) => {
                        tracing::error!(trigger = trigger.name, %error, "trigger round failed");
                        tokio::time::sleep(trigger.idle).await;
                    }
                }
            }
        });
    }
    while loops.join_next().await.is_some() {}
}
