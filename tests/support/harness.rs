//! A service in this process with no server and no HTTP: the embedded adapters over a fresh
//! data directory, a clock the test moves, and the pipeline turned by hand. A use case is
//! called as a handler calls it, with a principal and a command, and `drain` runs what its
//! events set off; what an answer looks like on the wire is the API tests' business.

use crate::{config, TestClock, ADMIN_KEY};
use ops_domain::access::{Principal, RequestKind};
use ops_domain::error::DomainError;
use ops_domain::service::Service;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;
use time::Duration;

pub struct Harness {
    pub service: Arc<Service>,
    pub clock: Arc<TestClock>,
    local: ops_local::Local,
    _data_dir: tempfile::TempDir,
}

impl Harness {
    /// A test environment's service on a data directory of its own, with the sandbox rail
    /// and the platform's admin key ([`ADMIN_KEY`]).
    pub async fn new() -> Harness {
        let data_dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::default());
        let local = ops_local::build(&config(data_dir.path().to_path_buf()), clock.clone())
            .await
            .expect("the embedded adapters open");
        Harness {
            service: local.app.service.clone(),
            clock,
            local,
            _data_dir: data_dir,
        }
    }

    /// Who a key is, as the API's edge finds it before calling a use case.
    pub async fn principal(&self, secret: &str) -> Result<Principal, DomainError> {
        let authenticated = self
            .service
            .authenticate(Some(secret), None, RequestKind::Change)
            .await?;
        Ok(authenticated.principal)
    }

    /// The platform's admin.
    pub async fn platform(&self) -> Principal {
        self.principal(ADMIN_KEY).await.expect("the platform's admin key")
    }

    /// Runs the pipeline until it has nothing left to do now.
    pub async fn drain(&self) {
        crate::drain(&self.local.driver).await;
    }

    /// Runs the pipeline, moving the clock forward by `step` between rounds, `rounds` times.
    pub async fn settle(&self, step: Duration, rounds: usize) {
        crate::settle(&self.local.driver, &self.clock, step, rounds).await;
    }
}

/// A command read from JSON, as the edge reads a body into one.
pub fn command<T: DeserializeOwned>(body: Value) -> T {
    ops_domain::body::parse(&body).expect("a command the edge would read")
}
