//! Operator signals as CloudWatch Embedded Metric Format: one JSON line per record, written to
//! the function's output, which Lambda's log agent turns into metrics with no API call.

use ops_domain::ports::{Metrics, Signal, SignalUnit};
use std::io::Write;
use std::sync::Mutex;

/// The metrics' namespace in CloudWatch; the alarms in `template.yaml` name it.
pub const NAMESPACE: &str = "PaymentOperations";

pub struct EmfMetrics {
    environment: String,
    out: Mutex<Box<dyn Write + Send>>,
}

impl EmfMetrics {
    /// Signals of the stack serving `environment`, written to `out` (a function's stdout).
    pub fn new(environment: &str, out: Box<dyn Write + Send>) -> EmfMetrics {
        EmfMetrics {
            environment: environment.to_owned(),
            out: Mutex::new(out),
        }
    }

    pub fn stdout(environment: &str) -> EmfMetrics {
        EmfMetrics::new(environment, Box::new(std::io::stdout()))
    }
}

/// One EMF document: the signals' values at the top level, described under `_aws`.
pub fn emf_line(environment: &str, signals: &[Signal], at_ms: i128) -> String {
    let mut document = serde_json::json!({
        "_aws": {
            "Timestamp": at_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["Environment"]],
                "Metrics": signals.iter().map(|signal| serde_json::json!({
                    "Name": signal.name,
                    "Unit": match signal.unit {
                        SignalUnit::Count => "Count",
                        SignalUnit::Seconds => "Seconds",
                    },
                })).collect::<Vec<_>>(),
            }],
        },
        "Environment": environment,
    });
    for signal in signals {
        document[signal.name] = serde_json::json!(signal.value);
    }
    document.to_string()
}

impl Metrics for EmfMetrics {
    fn record(&self, signals: &[Signal]) {
        if signals.is_empty() {
            return;
        }
        let now = time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
        let line = emf_line(&self.environment, signals, now);
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(error) = writeln!(out, "{line}").and_then(|()| out.flush()) {
            tracing::warn!(%error, "an operator signal was not written");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_an_emf_document_naming_each_signal_with_its_value() {
        let signals = [
            Signal::count("DeadLetters", 2),
            Signal {
                name: "OldestInProgressSeconds",
                value: 90.0,
                unit: SignalUnit::Seconds,
            },
        ];
        let line: serde_json::Value =
            serde_json::from_str(&emf_line("production", &signals, 1_700_000_000_000)).unwrap();
        let described = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(line["_aws"]["Timestamp"], 1_700_000_000_000_i64);
        assert_eq!(described["Namespace"], NAMESPACE);
        assert_eq!(described["Dimensions"], serde_json::json!([["Environment"]]));
        assert_eq!(
            described["Metrics"],
            serde_json::json!([
                {"Name": "DeadLetters", "Unit": "Count"},
                {"Name": "OldestInProgressSeconds", "Unit": "Seconds"}
            ])
        );
        assert_eq!(
            (
                &line["Environment"],
                &line["DeadLetters"],
                &line["OldestInProgressSeconds"]
            ),
            (
                &serde_json::json!("production"),
                &serde_json::json!(2.0),
                &serde_json::json!(90.0)
            )
        );
    }
}
