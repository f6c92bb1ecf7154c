use async_trait::async_trait;
use ops_domain::ports::{Admission, Limits, RateLimiter, StoreError};
use std::collections::HashMap;
use std::sync::Mutex;

/// Request counts in the process's memory: local mode's (one process serves every request, so
/// its memory sees them all; counts need not outlive a restart), and a Lambda function's reads
/// (counted where they run, so a read writes nothing).
#[derive(Default)]
pub struct InMemoryRateLimiter {
    /// Per group: the window it was last counted in, and its counts there.
    windows: Mutex<HashMap<String, Window>>,
}

/// Groups counted before old seconds' counts are dropped.
const PRUNE_ABOVE: usize = 10_000;

#[derive(Default)]
struct Window {
    second: i64,
    total: u32,
    members: HashMap<String, u32>,
}

#[async_trait]
impl RateLimiter for InMemoryRateLimiter {
    async fn admit(&self, group: &str, member: &str, window: i64, limits: Limits) -> Result<Admission, StoreError> {
        let mut windows = self.windows.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if windows.len() >= PRUNE_ABOVE {
            // Sources of failed authentications come and go: forget counts of seconds past.
            windows.retain(|_, counts| counts.second >= window);
        }
        let counts = windows.entry(group.to_owned()).or_default();
        if counts.second != window {
            *counts = Window {
                second: window,
                ..Window::default()
            };
        }
        let member_count = counts.members.get(member).copied().unwrap_or(0);
        if counts.total >= limits.group || member_count >= limits.member {
            return Ok(Admission::REFUSED);
        }
        counts.total += 1;
        counts.members.insert(member.to_owned(), member_count + 1);
        Ok(Admission::counted(member_count + 1, counts.total, limits))
    }
}
