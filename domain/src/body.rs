//! Reads a JSON body into a command with errors that say what went wrong as a type, not as
//! text: a field no command has, a field a command needs, or a value of the wrong kind. serde's
//! derive reports these through `de::Error::unknown_field` and `missing_field`; this
//! deserializer over a `serde_json::Value` keeps them as [`BodyError`] variants instead of
//! folding them into a message. Request bodies are read with it, and so is the operation a
//! schedule will create, so both name the same field the same way.

use crate::DomainError;
use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{self, DeserializeOwned, Deserializer, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::Value;
use std::fmt;

/// Reads a command out of a JSON object, naming the offending field (`items[0].amount`) on
/// failure.
pub fn parse<T: DeserializeOwned>(value: &Value) -> Result<T, DomainError> {
    // serde reads structs from arrays too; a body is always an object.
    if !value.is_object() {
        return Err(DomainError::invalid(
            "body",
            "invalid_body",
            "The body must be a JSON object.",
        ));
    }
    serde_path_to_error::deserialize(BodyValue(value.clone())).map_err(|error| {
        let path = param_of(error.path());
        // An unknown field is already the last segment of the path; a missing one is not.
        let join = |field: &str| match path.as_str() {
            "." => field.to_string(),
            p if p == field || p.ends_with(&format!(".{field}")) => p.to_string(),
            p => format!("{p}.{field}"),
        };
        let (param, code, message) = match error.into_inner() {
            BodyError::UnknownField(field) => (
                join(&field),
                "parameter_unknown",
                format!("Received unknown parameter: {}", join(&field)),
            ),
            BodyError::MissingField(field) => (
                join(field),
                "parameter_missing",
                format!("Missing required param: {}.", join(field)),
            ),
            BodyError::Invalid(inner) => (
                path.clone(),
                "parameter_invalid",
                format!("Invalid value for {path}: {inner}."),
            ),
        };
        DomainError::InvalidRequest {
            code,
            param: Some(param),
            message,
        }
    })
}

/// The path to a field as `param` names it (`items[0].amount`; `.` for the body itself), a
/// metadata key as metadata's own checks name it: `metadata[key]`.
fn param_of(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut param = String::new();
    let mut in_metadata = false;
    for segment in path {
        match segment {
            Segment::Seq { index } => param.push_str(&format!("[{index}]")),
            Segment::Map { key } if in_metadata => param.push_str(&format!("[{key}]")),
            other => {
                if !param.is_empty() {
                    param.push('.');
                }
                param.push_str(&other.to_string());
            }
        }
        in_metadata = matches!(segment, Segment::Map { key } if key == "metadata");
    }
    if param.is_empty() {
        param.push('.');
    }
    param
}

#[derive(Debug, Clone, PartialEq)]
enum BodyError {
    UnknownField(String),
    MissingField(&'static str),
    /// A value of the wrong kind or out of range, in serde's words.
    Invalid(String),
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::UnknownField(field) => write!(f, "unknown field {field}"),
            BodyError::MissingField(field) => write!(f, "missing field {field}"),
            BodyError::Invalid(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for BodyError {}

impl de::Error for BodyError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        BodyError::Invalid(message.to_string())
    }

    fn invalid_type(given: de::Unexpected, expected: &dyn de::Expected) -> Self {
        mismatch(given, expected, false)
    }

    fn invalid_value(given: de::Unexpected, expected: &dyn de::Expected) -> Self {
        mismatch(given, expected, true)
    }

    fn unknown_field(field: &str, _expected: &'static [&'static str]) -> Self {
        BodyError::UnknownField(field.to_owned())
    }

    fn missing_field(field: &'static str) -> Self {
        BodyError::MissingField(field)
    }
}

/// A value of the wrong kind (or, with `range`, an integer out of bounds), in JSON's words.
fn mismatch(given: de::Unexpected, expected: &dyn de::Expected, range: bool) -> BodyError {
    BodyError::Invalid(format!(
        "expected {}, got {}",
        in_json_terms(&expected.to_string(), range),
        given_in_json_terms(given)
    ))
}

/// What serde expected, said in JSON's words rather than Rust's (`i64` is an integer, a
/// sequence an array, a struct an object); with `range`, an integer's bounds too (the value
/// was an integer out of them).
fn in_json_terms(expected: &str, range: bool) -> String {
    let bounds = |min: i128, max: i128| match range {
        true => format!("an integer from {min} to {max}"),
        false => "an integer".to_owned(),
    };
    match expected {
        "i8" => bounds(i8::MIN.into(), i8::MAX.into()),
        "i16" => bounds(i16::MIN.into(), i16::MAX.into()),
        "i32" => bounds(i32::MIN.into(), i32::MAX.into()),
        "i64" => bounds(i64::MIN.into(), i64::MAX.into()),
        "u8" => bounds(0, u8::MAX.into()),
        "u16" => bounds(0, u16::MAX.into()),
        "u32" => bounds(0, u32::MAX.into()),
        "u64" => bounds(0, u64::MAX.into()),
        "f32" | "f64" => "a number".to_owned(),
        "a sequence" => "an array".to_owned(),
        "a map" => "an object".to_owned(),
        other if other.starts_with("struct ") => "an object".to_owned(),
        other => other.to_owned(),
    }
}

/// The value given, in JSON's words; a long string is cut short.
fn given_in_json_terms(given: de::Unexpected) -> String {
    match given {
        de::Unexpected::Bool(b) => b.to_string(),
        de::Unexpected::Unsigned(n) => format!("the number {n}"),
        de::Unexpected::Signed(n) => format!("the number {n}"),
        de::Unexpected::Float(n) => format!("the number {n}"),
        de::Unexpected::Str(text) if text.chars().count() > 40 => {
            format!("the string \"{}…\"", text.chars().take(40).collect::<String>())
        }
        de::Unexpected::Str(text) => format!("the string {text:?}"),
        de::Unexpected::Unit => "null".to_owned(),
        de::Unexpected::Seq => "an array".to_owned(),
        de::Unexpected::Map => "an object".to_owned(),
        other => other.to_string(),
    }
}

/// A JSON value as a deserializer whose error is a [`BodyError`].
struct BodyValue(Value);

impl<'de> IntoDeserializer<'de, BodyError> for BodyValue {
    type Deserializer = BodyValue;

    fn into_deserializer(self) -> BodyValue {
        self
    }
}

impl<'de> Deserializer<'de> for BodyValue {
    type Error = BodyError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, BodyError> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => visitor.visit_u64(u),
                (_, Some(i), _) => visitor.visit_i64(i),
                (_, _, Some(f)) => visitor.visit_f64(f),
                _ => Err(de::Error::custom("a number out of range")),
            },
            Value::String(s) => visitor.visit_string(s),
            Value::Array(items) => {
                let mut seq = SeqDeserializer::new(items.into_iter().map(BodyValue));
                let read = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(read)
            }
            Value::Object(map) => {
                let mut entries = MapDeserializer::new(map.into_iter().map(|(k, v)| (k, BodyValue(v))));
                let read = visitor.visit_map(&mut entries)?;
                entries.end()?;
                Ok(read)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, BodyError> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            other => visitor.visit_some(BodyValue(other)),
        }
    }

    /// Unit variants are strings; the others an object with the variant's name as its one key.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, BodyError> {
        match self.0 {
            Value::String(variant) => visitor.visit_enum(variant.into_deserializer()),
            Value::Object(map) if map.len() == 1 => {
                let entries = MapDeserializer::new(map.into_iter().map(|(k, v)| (k, BodyValue(v))));
                visitor.visit_enum(de::value::MapAccessDeserializer::new(entries))
            }
            // Every other kind of value is refused by the visitor, in serde's usual words.
            other => match BodyValue(other).deserialize_any(EnumExpected { name, variants }) {
                Err(refused) => Err(refused),
                Ok(_) => Err(de::Error::custom(format!("expected a {name}"))),
            },
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, BodyError> {
        visitor.visit_newtype_struct(self)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// Refuses a value that cannot name an enum variant, in serde's usual words.
struct EnumExpected {
    name: &'static str,
    variants: &'static [&'static str],
}

impl<'de> Visitor<'de> for EnumExpected {
    type Value = de::IgnoredAny;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {} (one of {})", self.name, self.variants.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Command {
        name: String,
        count: Option<u32>,
        kind: Kind,
        tags: Vec<String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Payout,
        Transfer,
    }

    fn read(value: Value) -> Result<Command, BodyError> {
        Command::deserialize(BodyValue(value))
    }

    #[test]
    fn fields_unknown_missing_and_invalid_are_told_apart_by_type() {
        let ok = read(json!({"name": "a", "count": 2, "kind": "transfer", "tags": ["x"]})).unwrap();
        assert_eq!((ok.count, ok.kind), (Some(2), Kind::Transfer));
        assert_eq!(
            read(json!({"name": "a", "kind": "payout", "tags": []})).unwrap().count,
            None
        );
        assert_eq!(
            read(json!({"name": "a", "kind": "payout", "tags": [], "extra": 1})),
            Err(BodyError::UnknownField("extra".into()))
        );
        assert_eq!(
            read(json!({"kind": "payout", "tags": []})),
            Err(BodyError::MissingField("name"))
        );
        for bad in [
            json!({"name": 1, "kind": "payout", "tags": []}),
            json!({"name": "a", "count": -1, "kind": "payout", "tags": []}),
            json!({"name": "a", "count": 1.5, "kind": "payout", "tags": []}),
            json!({"name": "a", "kind": "refund", "tags": []}),
            json!({"name": "a", "kind": 3, "tags": []}),
            json!({"name": "a", "kind": "payout", "tags": "x"}),
        ] {
            assert!(matches!(read(bad.clone()), Err(BodyError::Invalid(_))), "{bad}");
        }
    }

    #[test]
    fn a_param_names_list_entries_by_index_and_metadata_keys_in_brackets() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Create {
            items: Vec<Command>,
            metadata: Option<std::collections::BTreeMap<String, String>>,
        }
        let param = |body: Value| match parse::<Create>(&body) {
            Err(DomainError::InvalidRequest { param, .. }) => param.unwrap_or_default(),
            other => panic!("{other:?}"),
        };
        let item = json!({"name": "a", "kind": "payout", "tags": []});
        assert_eq!(param(json!({"items": [item, {"name": 1}]})), "items[1].name");
        assert_eq!(param(json!({"items": [], "metadata": {"order": 7}})), "metadata[order]");
        assert_eq!(param(json!({"items": [item], "metadata": []})), "metadata");
        assert_eq!(param(json!({})), "items");
    }

    #[test]
    fn a_value_of_the_wrong_kind_is_told_in_jsons_words() {
        let told = |value: Value| match read(value) {
            Err(BodyError::Invalid(message)) => message,
            other => panic!("{other:?}"),
        };
        let body = |count: Value, tags: Value| json!({"name": "a", "count": count, "kind": "payout", "tags": tags});
        assert_eq!(
            told(body(json!("2"), json!([]))),
            r#"expected an integer, got the string "2""#
        );
        assert_eq!(
            told(body(json!(1.5), json!([]))),
            "expected an integer, got the number 1.5"
        );
        assert_eq!(
            told(body(json!(-1), json!([]))),
            "expected an integer from 0 to 4294967295, got the number -1"
        );
        assert_eq!(told(body(json!(1), json!({}))), "expected an array, got an object");
        assert_eq!(told(body(json!(1), json!([null]))), "expected a string, got null");
        assert_eq!(
            told(json!({"name": "x".repeat(50), "kind": "payout", "tags": "y".repeat(50)})),
            format!("expected an array, got the string \"{}…\"", "y".repeat(40))
        );
    }
}
