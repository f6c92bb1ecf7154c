//! What a record of the table's stream carries, read in the table's own item format (the
//! `entity` attribute, the `doc` document deflated or not, the `outbox`), so that only the
//! store that writes items knows how to read them back. Two shapes of a record's new image
//! arrive: Lambda's (`serde_dynamo`'s item, in a trigger's payload) and the Streams API's
//! (the SDK's, when the trigger driver reads the stream itself).

use super::documents;
use super::OutboxRecord;
use aws_sdk_dynamodbstreams::types::AttributeValue as StreamValue;
use ops_domain::event::Event;
use serde_dynamo::{AttributeValue, Item};
use std::collections::HashMap;

/// The domain event an inserted event item carries: `None` for any other item; an error,
/// naming what is wrong, for an event item that cannot be read.
pub fn event_of(image: &Item) -> Option<Result<Event, String>> {
    if !matches!(image.get("entity"), Some(AttributeValue::S(entity)) if entity == "event") {
        return None;
    }
    let doc = match image.get("doc") {
        Some(AttributeValue::S(text)) => Ok(std::borrow::Cow::Borrowed(text.as_str())),
        Some(AttributeValue::B(deflated)) => documents::inflate(deflated).map(std::borrow::Cow::Owned),
        _ => Err("no document".to_owned()),
    };
    Some(doc.and_then(|doc| serde_json::from_str::<Event>(&doc).map_err(|e| e.to_string())))
}

/// The record of an item written with an outbox: `None` for an item without one.
pub fn outbox_of(image: &Item) -> Result<Option<OutboxRecord>, String> {
    let Some(AttributeValue::B(outbox)) = image.get("outbox") else {
        return Ok(None);
    };
    let Some(AttributeValue::S(entity)) = image.get("entity") else {
        return Err("an outbox on an item without an entity".into());
    };
    let doc = match image.get("doc") {
        Some(AttributeValue::S(text)) => text.clone(),
        Some(AttributeValue::B(deflated)) => documents::inflate(deflated)?,
        _ => return Err("an outbox on an item without a document".into()),
    };
    Ok(Some(OutboxRecord {
        entity: entity.clone(),
        doc,
        outbox: outbox.clone(),
    }))
}

/// Whether a Streams API image is an event item's.
pub fn is_event_item(image: Option<&HashMap<String, StreamValue>>) -> bool {
    let entity = image.and_then(|i| i.get("entity")).and_then(|v| v.as_s().ok());
    entity.map(String::as_str) == Some("event")
}

/// Whether a Streams API image is of an item written with an outbox.
pub fn carries_outbox(image: Option<&HashMap<String, StreamValue>>) -> bool {
    matches!(image.and_then(|i| i.get("outbox")), Some(StreamValue::B(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(pairs: &[(&str, AttributeValue)]) -> Item {
        let map: HashMap<String, AttributeValue> = pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        Item::from(map)
    }

    #[test]
    fn only_event_items_carry_events_and_a_damaged_one_is_an_error() {
        let other = image(&[("entity", AttributeValue::S("operation".into()))]);
        assert!(event_of(&other).is_none());
        let damaged = image(&[
            ("entity", AttributeValue::S("event".into())),
            ("doc", AttributeValue::S("{not json".into())),
        ]);
        assert!(matches!(event_of(&damaged), Some(Err(_))));
        let bare = image(&[("entity", AttributeValue::S("event".into()))]);
        assert_eq!(event_of(&bare).unwrap().unwrap_err(), "no document");
    }

    #[test]
    fn an_outbox_needs_its_entity_and_document() {
        let none = image(&[("entity", AttributeValue::S("operation".into()))]);
        assert!(outbox_of(&none).unwrap().is_none());
        let orphan = image(&[("outbox", AttributeValue::B(vec![1, 2]))]);
        assert!(outbox_of(&orphan).unwrap_err().contains("without an entity"));
        let whole = image(&[
            ("outbox", AttributeValue::B(vec![1, 2])),
            ("entity", AttributeValue::S("operation".into())),
            ("doc", AttributeValue::S("{}".into())),
        ]);
        let record = outbox_of(&whole).unwrap().unwrap();
        assert_eq!(
            (record.entity.as_str(), record.doc.as_str(), record.outbox),
            ("operation", "{}", vec![1, 2])
        );
    }
}
