//! Operator signals in local mode: one log line each (no metrics service runs here).

use ops_domain::ports::{Metrics, Signal};

#[derive(Debug, Default)]
pub struct LogMetrics;

impl Metrics for LogMetrics {
    fn record(&self, signals: &[Signal]) {
        for signal in signals {
            tracing::info!(metric = signal.name, value = signal.value, "operator signal");
        }
    }
}
