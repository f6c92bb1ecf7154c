//! JSON objects with a repeated key are refused: parsers disagree on which value wins, so a
//! body read one way by a proxy or a signature check and another way here is a way in.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// The path of the first repeated key in `bytes` (e.g. `items[0].amount`), if any. Bytes that
/// are not JSON give `None`: the parser proper reports those.
pub fn first_repeated_key(bytes: &[u8]) -> Option<String> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    (Walk { path: String::new() })
        .deserialize(&mut deserializer)
        .unwrap_or_default()
}

/// Walks one JSON value under `path`, answering the first repeated key found in it.
struct Walk {
    path: String,
}

impl<'de> DeserializeSeed<'de> for Walk {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = HashSet::new();
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if found.is_some() {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            if !seen.insert(key) {
                found = Some(path);
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            found = map.next_value_seed(Walk { path })?;
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        let mut index = 0;
        loop {
            let next = if found.is_some() {
                seq.next_element::<IgnoredAny>()?.map(|_| None)
            } else {
                seq.next_element_seed(Walk {
                    path: format!("{}[{index}]", self.path),
                })?
            };
            match next {
                None => return Ok(found),
                Some(inner) => found = found.or(inner),
            }
            index += 1;
        }
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::first_repeated_key;

    #[test]
    fn repeated_keys_are_found_with_their_path() {
        assert_eq!(first_repeated_key(br#"{"a": 1, "b": 2}"#), None);
        assert_eq!(
            first_repeated_key(br#"{"customer_id": "x", "customer_id": "y"}"#).as_deref(),
            Some("customer_id")
        );
        assert_eq!(
            first_repeated_key(br#"{"items": [{"amount": 1}, {"amount": 1, "amount": 2}]}"#).as_deref(),
            Some("items[1].amount")
        );
        // The same key in sibling objects is no repetition.
        assert_eq!(first_repeated_key(br#"[{"a": 1}, {"a": 1}]"#), None);
        assert_eq!(first_repeated_key(b"not json"), None);
    }
}
