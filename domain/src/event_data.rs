//! An event's `data` as the JSON text it was written as.

use serde::{Deserialize, Serialize};

/// An event's `data`, kept as the JSON text it was written as: a consumer reads the few
/// fields it decides on ([`EventData::field`]) without building the whole document (an
/// operation's event carries the operation), and a webhook or a list sends the text as is.
#[derive(Debug, Clone)]
pub struct EventData(Box<serde_json::value::RawValue>);

impl EventData {
    pub fn of(data: &impl Serialize) -> EventData {
        EventData(serde_json::value::to_raw_value(data).expect("event data always serializes"))
    }

    /// The data's JSON text.
    pub fn json(&self) -> &str {
        self.0.get()
    }

    /// The fields a consumer decides on, as `T` names them (the others are skipped unread);
    /// `None` if the data does not read as a `T`.
    pub fn read<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        serde_json::from_str(self.json()).ok()
    }

    /// The top-level field `name` if it is a string (an id the event names); the other fields
    /// are skipped unread.
    pub fn text(&self, name: &str) -> Option<String> {
        let mut reader = serde_json::Deserializer::from_str(self.json());
        serde::Deserializer::deserialize_map(&mut reader, FieldNamed::<String>(name, std::marker::PhantomData))
            .ok()
            .flatten()
    }

    /// The whole data as a JSON value (for tests and tools; consumers read fields).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.json()).expect("event data is JSON")
    }
}

/// Equal if they say the same: data read back from a store's outbox may list its fields in
/// another order.
impl PartialEq for EventData {
    fn eq(&self, other: &EventData) -> bool {
        self.json() == other.json() || self.to_value() == other.to_value()
    }
}

impl Serialize for EventData {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for EventData {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<EventData, D::Error> {
        deserializer.deserialize_newtype_struct(RAW_VALUE_TOKEN, EventDataVisitor)
    }
}

/// The name by which serde_json hands a value's text to a raw value as it reads it, rather
/// than the value (`serde_json::value::RawValue`'s own deserializer asks for it the same way).
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

struct EventDataVisitor;

impl<'de> serde::de::Visitor<'de> for EventDataVisitor {
    type Value = EventData;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an event's data")
    }

    /// serde_json's reader: the data's text, as written.
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<EventData, A::Error> {
        use serde::de::Error;
        map.next_key::<serde::de::IgnoredAny>()?
            .ok_or_else(|| A::Error::custom("no event data"))?;
        let text: String = map.next_value()?;
        serde_json::value::RawValue::from_string(text)
            .map(EventData)
            .map_err(A::Error::custom)
    }

    /// Any other reader (an event inside a tagged enum, which serde buffers first): the data
    /// as a value, written back to text.
    fn visit_newtype_struct<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<EventData, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Ok(EventData::of(&value))
    }
}

/// Reads one field of a JSON object, skipping the others without building them.
struct FieldNamed<'n, T>(&'n str, std::marker::PhantomData<T>);

impl<'de, T: serde::de::DeserializeOwned> serde::de::Visitor<'de> for FieldNamed<'_, T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut found = None;
        while let Some(is_it) = map.next_key_seed(KeyIs(self.0))? {
            if is_it && found.is_none() {
                found = map.next_value::<Option<T>>()?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Whether a key is the one looked for, compared where it lies in the text.
struct KeyIs<'n>(&'n str);

impl<'de> serde::de::DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> serde::de::Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fields out of alphabetical order (a JSON value would sort them), the nested object
    /// first with keys of the same names.
    fn data() -> EventData {
        #[derive(Serialize)]
        struct Data {
            object: serde_json::Value,
            status: &'static str,
            operation_id: &'static str,
        }
        EventData::of(&Data {
            object: serde_json::json!({"status": "nested", "operation_id": "op_nested"}),
            status: "approved",
            operation_id: "op_1",
        })
    }

    #[test]
    fn a_field_is_read_at_the_top_level_only() {
        let data = data();
        assert_eq!(data.text("status").as_deref(), Some("approved"));
        assert_eq!(data.text("operation_id").as_deref(), Some("op_1"));
        assert_eq!(data.text("missing"), None);
        assert_eq!(data.text("object"), None, "not a string");
        #[derive(Deserialize)]
        struct Facts {
            status: String,
            object: serde_json::Value,
        }
        let facts: Facts = data.read().unwrap();
        assert_eq!(
            (facts.status.as_str(), &facts.object["status"]),
            ("approved", &serde_json::json!("nested"))
        );
    }

    #[test]
    fn the_data_is_kept_as_written_through_every_reader() {
        let data = data();
        let text = serde_json::to_string(&data).unwrap();
        assert_eq!(text, data.json());
        let read: EventData = serde_json::from_str(&text).unwrap();
        assert_eq!(read.json(), data.json(), "the text, not a copy of the value");
        let from_value: EventData = serde_json::from_value(serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(from_value, data, "the same data, its fields in another order");
        assert_ne!(from_value.json(), data.json());

        // Inside an internally tagged enum serde buffers the fields before the data reads them.
        #[derive(Deserialize)]
        #[serde(tag = "kind")]
        enum Tagged {
            One { data: EventData },
        }
        let Tagged::One { data: buffered } =
            serde_json::from_str(&format!(r#"{{"kind":"One","data":{text}}}"#)).unwrap();
        assert_eq!(buffered, data);
        assert_eq!(buffered.text("status").as_deref(), Some("approved"));
    }
}
