//! How an entity's JSON is stored in its item's `doc` attribute: as text when short, deflated
//! (binary) when longer. An item's write units, and those of each index copy of it, count its
//! bytes by the kilobyte; an operation, or an event carrying one, is 1–2 KB of JSON that is
//! mostly repeated field names. Deflated against a preset dictionary of such documents
//! ([`DICTIONARY`]) the field names, enums and id prefixes cost a few bits each, and an
//! operation's item stays well inside one unit. Readers (the store, the change stream's
//! consumers) take every form, so items written before stay readable.

use miniz_oxide::deflate::core::{
    compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush, TDEFLStatus,
};
use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
use miniz_oxide::inflate::TINFLStatus;
use std::borrow::Cow;

/// Documents up to this many bytes stay text: deflating them would save no write unit.
const DEFLATE_OVER: usize = 512;

/// A deflated document may not inflate past this (DynamoDB items are at most 400 KB).
const INFLATED_LIMIT: usize = 8 * 1024 * 1024;

/// The deflate level: miniz's default, the one documents were deflated with before.
const LEVEL: i32 = 6;

/// Typical documents (an operation, a transaction, events, an audit entry, a delivery, a work
/// item, an outbox, a created operation's response), the most frequent last, where deflate's
/// distances are shortest. A document deflated against it starts with [`DICTIONARY_1`]. Its
/// bytes can never change: documents stored with it need exactly them to inflate. A better
/// dictionary is a new file and a new marker, and this one stays for reading.
const DICTIONARY: &[u8] = include_bytes!("documents/dictionary-1.jsonl");

/// What a document deflated against [`DICTIONARY`] starts with. A raw deflate stream cannot
/// start with `0x06` (its first block would be of the reserved type 3), so documents deflated
/// without a dictionary, as they were before, are told apart by their first byte.
const DICTIONARY_1: [u8; 2] = [0x06, 0x01];

/// A document as stored: `Ok(text)` if kept as text, `Err(bytes)` if deflated.
pub fn encode(json: String) -> Result<String, Vec<u8>> {
    if json.len() <= DEFLATE_OVER {
        return Ok(json);
    }
    Err(deflate(json.as_bytes()))
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
    Err(deflate(bytes))
}

/// `bytes` deflated against [`DICTIONARY`], after its marker.
pub fn deflate(bytes: &[u8]) -> Vec<u8> {
    let mut deflated = DICTIONARY_1.to_vec();
    compress_into(&mut primed().clone(), bytes, &mut deflated, TDEFLFlush::Finish);
    deflated
}

/// A compressor whose window holds the dictionary, made once: each document's compressor is a
/// copy of it (an operation deflates in about 5 µs this way, 36 µs filling a new window each
/// time, 10 µs deflated alone). Boxed: a compressor is 64 KB, which a static would add to
/// the binary.
fn primed() -> &'static CompressorOxide {
    static PRIMED: std::sync::OnceLock<Box<CompressorOxide>> = std::sync::OnceLock::new();
    PRIMED.get_or_init(|| {
        let mut compressor = CompressorOxide::new(create_comp_flags_from_zip_params(LEVEL, 0, 0));
        // The dictionary goes through the compressor only to fill its window: what it makes
        // of it is dropped, and each document's blocks start after the flush, on a byte
        // boundary.
        compress_into(&mut compressor, DICTIONARY, &mut vec![], TDEFLFlush::Sync);
        Box::new(compressor)
    })
}

/// Runs `input` through `compressor`, appending what it makes to `output`, until `flush` is
/// done. Not inlined: one copy of miniz's compressor in the binary serves every caller.
#[inline(never)]
fn compress_into(compressor: &mut CompressorOxide, mut input: &[u8], output: &mut Vec<u8>, flush: TDEFLFlush) {
    let mut at = output.len();
    output.resize(at + input.len() / 2 + 64, 0);
    loop {
        let (status, read, written) = compress(compressor, input, &mut output[at..], flush);
        at += written;
        input = &input[read.min(input.len())..];
        let room = output.len() - at;
        match status {
            TDEFLStatus::Done => break,
            TDEFLStatus::Okay if input.is_empty() && room > 0 && flush != TDEFLFlush::Finish => break,
            TDEFLStatus::Okay if room < 64 => output.resize(output.len() * 2, 0),
            TDEFLStatus::Okay => {}
            other => unreachable!("deflating into memory cannot fail: {other:?}"),
        }
    }
    output.truncate(at);
}

/// The bytes of a deflated document or response, either form.
pub fn inflate_bytes(deflated: &[u8]) -> Result<Vec<u8>, String> {
    match deflated.strip_prefix(&DICTIONARY_1[..]) {
        Some(stream) => inflate_after(DICTIONARY, stream),
        None => inflate_after(&[], deflated),
    }
}

/// Inflates `stream` as the continuation of `dictionary` (empty for a document deflated
/// alone): the output buffer starts with the dictionary, so the stream's back-references
/// reach into it. Not inlined: one copy of miniz's inflater in the binary.
#[inline(never)]
fn inflate_after(dictionary: &[u8], mut stream: &[u8]) -> Result<Vec<u8>, String> {
    let mut output = Vec::with_capacity(dictionary.len() + stream.len() * 4);
    output.extend_from_slice(dictionary);
    output.resize(dictionary.len() + stream.len() * 4 + 64, 0);
    let mut inflater = Box::<DecompressorOxide>::default();
    let mut at = dictionary.len();
    loop {
        let flags = inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
        let (status, read, written) = decompress(&mut inflater, stream, &mut output, at, flags);
        at += written;
        stream = &stream[read.min(stream.len())..];
        match status {
            TINFLStatus::Done => {
                output.truncate(at);
                output.drain(..dictionary.len());
                return Ok(output);
            }
            TINFLStatus::HasMoreOutput if output.len() - dictionary.len() < INFLATED_LIMIT => {
                let grown = (output.len() * 2).min(dictionary.len() + INFLATED_LIMIT);
                output.resize(grown, 0);
            }
            other => return Err(format!("a deflated document does not inflate: {other:?}")),
        }
    }
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

    /// An operation as the store writes one (its fields in the struct's order), with ids, times
    /// and values the dictionary does not hold.
    fn operation_json() -> String {
        concat!(
            r#"{"id":"op_01q7zx3kd2m9c4r8t6v1w5y0bn","customer_id":"cus_01q7zw9g5h2j8k4m6n1p3r7s0t","type":"payout","#,
            r#""currency":"MXN","items":[{"id":"itm_01q7zx3kd2m9c4r8t6v1w5y0bp","beneficiary":{"id_type":"CURP","#,
            r#""id":"GODE561231HDFRRN09"},"destination":{"rail":"psp-local:spei","account":"012180001234567897"},"#,
            r#""amount":2499900,"reference":"Factura 8812","transaction_id":null}],"workflow":"auto_approve","#,
            r#""status":"processing","cause":{"code":"operation_approved","message":"Approved by workflow auto_approve","#,
            r#""actor":{"type":"system","id":"workflow:auto_approve"},"at":"2027-02-03T04:05:06.789012345Z"},"#,
            r#""total_amount":2499900,"approvals":[],"created_by":"key_01q7zw9h8j3k5m7n9p2r4s6t8v","#,
            r#""created_at":"2027-02-03T04:05:06.123456789Z","updated_at":"2027-02-03T04:05:06.789012345Z","#,
            r#""metadata":{"invoice":"8812"},"environment":"production","source_account_id":null,"#,
            r#""destination_account_id":null,"version":2}"#
        )
        .to_owned()
    }

    #[test]
    fn short_documents_stay_text_and_long_ones_come_back_whole() {
        assert_eq!(
            encode("{\"id\":\"op_1\"}".to_owned()),
            Ok("{\"id\":\"op_1\"}".to_owned())
        );
        let long = operation_json();
        let Err(deflated) = encode(long.clone()) else {
            panic!("a long document is deflated")
        };
        assert!(deflated.starts_with(&DICTIONARY_1));
        assert_eq!(inflate(&deflated).unwrap(), long);
        assert_eq!(json_of(None, Some(&deflated)).unwrap(), long);
    }

    #[test]
    fn the_dictionary_takes_an_operation_with_values_it_never_saw_under_three_fifths_of_deflate_alone() {
        let json = operation_json();
        let alone = miniz_oxide::deflate::compress_to_vec(json.as_bytes(), 6).len();
        let with_dictionary = deflate(json.as_bytes()).len();
        assert!(
            with_dictionary * 5 < alone * 3,
            "{with_dictionary} against {alone}, of {}",
            json.len()
        );
    }

    #[test]
    fn documents_deflated_without_the_dictionary_before_still_inflate() {
        let json = operation_json();
        let before = miniz_oxide::deflate::compress_to_vec(json.as_bytes(), 6);
        assert_ne!(before[0], DICTIONARY_1[0]);
        assert_eq!(inflate(&before).unwrap(), json);
    }

    #[test]
    fn documents_far_longer_than_the_dictionary_come_back_byte_for_byte() {
        let body =
            serde_json::json!({"items": (0..5_000).map(|i| format!("item {i}")).collect::<Vec<_>>()}).to_string();
        assert!(body.len() > 50_000);
        let Err(deflated) = encode_bytes(body.as_bytes()) else {
            panic!("a long body is deflated")
        };
        assert!(deflated.len() < body.len());
        assert_eq!(inflate_bytes(&deflated).unwrap(), body.as_bytes());
        assert_eq!(encode_bytes(b"{}"), Ok(&b"{}"[..]));
    }

    #[test]
    fn the_dictionary_is_the_one_stored_documents_were_deflated_with() {
        use sha2::Digest;
        // Every document stored with marker 1 needs exactly these bytes to inflate: a better
        // dictionary is a second file and marker, never an edit of this one.
        assert_eq!(
            hex::encode(sha2::Sha256::digest(DICTIONARY)),
            "1c3cc84a792c0632309f743093052e3731734109c4ae8c77851e04de728ee32e"
        );
    }

    #[test]
    fn a_damaged_document_is_an_error_not_a_panic() {
        assert!(inflate(b"not deflate at all").is_err());
        assert!(json_of(None, None).is_err());
        let deflated = deflate(operation_json().as_bytes());
        assert!(inflate(&deflated[..deflated.len() / 2]).is_err(), "cut short");
        assert!(inflate(&DICTIONARY_1).is_err(), "the marker alone");
        let mut flipped = deflated.clone();
        flipped[DICTIONARY_1.len() + 3] ^= 0xff;
        assert_ne!(inflate(&flipped).ok(), Some(operation_json()));
    }
}
