use async_trait::async_trait;
use ops_domain::ports::{RateLimiter, StoreError};
use std::collections::HashMap;
use std::sync::Mutex;

/// Local mode's request counts: one process serves every request, so its memory sees them
/// all (counts need not outlive a restart).
#[derive(Default)]
pub struct InMemoryRateLimiter {
    /// Per key: the window it was last counted in, and its count there.
    windows: Mutex<HashMap<String, (i64, u32)>>,
}

#[async_trait]
impl RateLimiter for InMemoryRateLimiter {
    async fn admit(&self, key_id: &str, window: i64, limit: u32) -> Result<bool, StoreError> {
        let mut windows = self.windows.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (counted_in, count) = windows.entry(key_id.to_owned()).or_insert((window, 0));
        if *counted_in != window {
            (*counted_in, *count) = (window, 0);
        }
        if *count >= limit {
            return Ok(false);
        }
        *count += 1;
        Ok(true)
    }
}
