//! JSON objects with a repeated key are refused: parsers disagree on which value wins, so a
//! body read one way by a proxy or a signature check and another way here is a way in.
//!
//! The body is read once: the value is built and its keys checked in the same pass, and a
//! key's path is written out only when it repeats.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::cell::RefCell;
use std::fmt;

/// Why a body is not a JSON value this service reads.
#[derive(Debug)]
pub enum BodyJson {
    /// Not JSON at all: the parser's own account of where and why.
    Invalid(serde_json::Error),
    /// JSON, but an object in it repeats a key: the first such key's path (`items[1].amount`).
    RepeatedKey(String),
}

/// `bytes` as one JSON value, refused if it is not JSON or repeats a key anywhere. Bytes that
/// are not JSON are reported as such even when a repeated key comes before the fault.
pub fn read_json(bytes: &[u8]) -> Result<Value, BodyJson> {
    let repeated = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = ValueAt {
        path: &Path::Root,
        repeated: &repeated,
    }
    .deserialize(&mut deserializer)
    .and_then(|value| deserializer.end().map(|()| value))
    .map_err(BodyJson::Invalid)?;
    match repeated.into_inner() {
        Some(path) => Err(BodyJson::RepeatedKey(path)),
        None => Ok(value),
    }
}

/// Where a value stands in the body, borrowed from the values around it while it is read.
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Key(Path::Root, key) => f.write_str(key),
            Path::Key(parent, key) => write!(f, "{parent}.{key}"),
            Path::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

/// Reads the value at `path`, noting the first repeated key met in it.
struct ValueAt<'a> {
    path: &'a Path<'a>,
    repeated: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for ValueAt<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueAt<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(ValueAt {
                path: &Path::Key(self.path, &key),
                repeated: self.repeated,
            })?;
            if object.contains_key(&key) {
                let mut repeated = self.repeated.borrow_mut();
                if repeated.is_none() {
                    *repeated = Some(Path::Key(self.path, &key).to_string());
                }
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(ValueAt {
            path: &Path::Index(self.path, items.len()),
            repeated: self.repeated,
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::{read_json, BodyJson};

    fn repeated(bytes: &[u8]) -> Option<String> {
        match read_json(bytes) {
            Err(BodyJson::RepeatedKey(path)) => Some(path),
            _ => None,
        }
    }

    #[test]
    fn repeated_keys_are_found_with_their_path() {
        assert_eq!(repeated(br#"{"a": 1, "b": 2}"#), None);
        assert_eq!(
            repeated(br#"{"customer_id": "x", "customer_id": "y"}"#).as_deref(),
            Some("customer_id")
        );
        assert_eq!(
            repeated(br#"{"items": [{"amount": 1}, {"amount": 1, "amount": 2}]}"#).as_deref(),
            Some("items[1].amount")
        );
        assert_eq!(
            repeated(br#"[{"a": {"b": [0, {"c": 1, "c": 1}]}}]"#).as_deref(),
            Some("[0].a.b[1].c")
        );
        // The first repetition is the one named.
        assert_eq!(repeated(br#"{"a": {"x": 1, "x": 2}, "a": 3}"#).as_deref(), Some("a.x"));
        // The same key in sibling objects is no repetition.
        assert_eq!(repeated(br#"[{"a": 1}, {"a": 1}]"#), None);
    }

    #[test]
    fn a_body_is_read_as_the_json_parser_reads_it() {
        for body in [
            r#"{"a": [1, -2, -0, 3.5, 1.5e300, 18446744073709551615, 18446744073709551616, true, null, "é\n"], "b": {}}"#,
            r#"[]"#,
            r#""text""#,
            r#"  42 "#,
        ] {
            let expected: serde_json::Value = serde_json::from_str(body).unwrap();
            assert_eq!(read_json(body.as_bytes()).unwrap(), expected, "{body}");
        }
    }

    #[test]
    fn what_is_not_json_is_refused_as_such_even_after_a_repeated_key() {
        for body in [
            &b"not json"[..],
            br#"{"a": 1} trailing"#,
            br#"{"a": 1, "a": 2"#,
            br#"{"a": 1e400}"#,
            b"",
        ] {
            assert!(matches!(read_json(body), Err(BodyJson::Invalid(_))), "{body:?}");
        }
    }
}
