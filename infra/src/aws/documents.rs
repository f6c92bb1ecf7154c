//! How an entity's JSON is stored in its item's `doc` attribute: as text when short, deflated
//! (binary) when longer. An item's write units, and those of each index copy of it, count its
//! bytes by the kilobyte; an operation, or an event carrying one, is 1–2 KB of JSON that is
//! mostly repeated field names, and deflated it fits in one unit. Readers (the store, the
//! change stream's consumers) take either form, so items written before stay readable.

use std::borrow::Cow;

/// Documents up to this many bytes stay text: deflating them would save no write unit.
const DEFLATE_OVER: usize = 512;

/// A deflated document may not inflate past this (DynamoDB items are at most 400 KB).
const INFLATED_LIMIT: usize = 8 * 1024 * 1024;

/// A document as stored: `Ok(text)` if kept as text, `Err(bytes)` if deflated.
pub fn encode(json: String) -> Result<String, Vec<u8>> {
    if json.len() <= DEFLATE_OVER {
        return Ok(json);
    }
    Err(miniz_oxide::deflate::compress_to_vec(json.as_bytes(), 6))
}

/// The JSON of a deflated document.
pub fn inflate(deflated: &[u8]) -> Result<String, String> {
    let bytes = inflate_bytes(deflated)?;
    String::from_utf8(bytes).map_err(|e| format!("a deflated document is not text: {e}"))
}

/// Bytes as stored: `Ok` as they are when short, `Err(deflated)` when longer (an idempotency
/// record's response: the bytes a replay sends, byte for byte).
pub fn encode_bytes(bytes: &[u8]) -> Result<&[u8], Vec<u8>> {
    if bytes.len() <= DEFLATE_OVER {
        return Ok(bytes);
    }
    Err(miniz_oxide::deflate::compress_to_vec(bytes, 6))
}

/// The bytes of a deflated document or response.
pub fn inflate_bytes(deflated: &[u8]) -> Result<Vec<u8>, String> {
    miniz_oxide::inflate::decompress_to_vec_with_limit(deflated, INFLATED_LIMIT)
        .map_err(|e| format!("a deflated document does not inflate: {e}"))
}

/// The JSON of a stored document, either form.
pub fn json_of<'a>(text: Option<&'a str>, deflated: Option<&[u8]>) -> Result<Cow<'a, str>, String> {
    match (text, deflated) {
        (Some(text), _) => Ok(Cow::Borrowed(text)),
        (None, Some(deflated)) => inflate(deflated).map(Cow::Owned),
        (None, None) => Err("an item without a document".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_documents_stay_text_and_long_ones_come_back_whole_and_smaller() {
        assert_eq!(
            encode("{\"id\":\"op_1\"}".to_owned()),
            Ok("{\"id\":\"op_1\"}".to_owned())
        );
        let long = serde_json::json!({
            "id": "op_01JD0000000000000000000000",
            "items": (0..20).map(|i| serde_json::json!({"amount": i, "currency": "CLP", "beneficiary": {"name": "A name"}})).collect::<Vec<_>>(),
        })
        .to_string();
        let Err(deflated) = encode(long.clone()) else {
            panic!("a long document is deflated")
        };
        assert!(deflated.len() * 2 < long.len(), "{} of {}", deflated.len(), long.len());
        assert_eq!(inflate(&deflated).unwrap(), long);
        assert_eq!(json_of(None, Some(&deflated)).unwrap(), long);
    }

    #[test]
    fn long_bytes_come_back_byte_for_byte() {
        let body = serde_json::json!({"items": (0..100).map(|i| format!("item {i}")).collect::<Vec<_>>()}).to_string();
        assert_eq!(encode_bytes(b"{}"), Ok(&b"{}"[..]));
        let Err(deflated) = encode_bytes(body.as_bytes()) else {
            panic!("a long body is deflated")
        };
        assert!(deflated.len() < body.len());
        assert_eq!(inflate_bytes(&deflated).unwrap(), body.as_bytes());
    }

    #[test]
    fn a_damaged_document_is_an_error_not_a_panic() {
        assert!(inflate(b"not deflate at all").is_err());
        assert!(json_of(None, None).is_err());
    }
}
