//! Domain events on an EventBridge bus, for the PSP's own systems.

use async_trait::async_trait;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use aws_sdk_eventbridge::Client;
use ops_domain::event::Event;
use ops_domain::ports::{BusError, EventBus};

pub struct EventBridgeBus {
    client: Client,
    bus: String,
}

impl EventBridgeBus {
    pub fn new(client: Client, bus: impl Into<String>) -> EventBridgeBus {
        EventBridgeBus {
            client,
            bus: bus.into(),
        }
    }
}

#[async_trait]
impl EventBus for EventBridgeBus {
    async fn publish(&self, events: &[Event]) -> Result<(), BusError> {
        // PutEvents takes at most 10 entries per call.
        for chunk in events.chunks(10) {
            let entries = chunk
                .iter()
                .map(|e| {
                    PutEventsRequestEntry::builder()
                        .event_bus_name(&self.bus)
                        .source("payment-operations")
                        .detail_type(&e.kind)
                        .detail(serde_json::to_string(e).expect("serializes"))
                        .build()
                })
                .collect();
            let sent = self
                .client
                .put_events()
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(BusError::new)?;
            if sent.failed_entry_count() > 0 {
                return Err(BusError::new(format!(
                    "{} events were refused by the bus",
                    sent.failed_entry_count()
                )));
            }
        }
        Ok(())
    }
}
