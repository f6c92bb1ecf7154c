//! Files: payroll CSVs and ISO 20022 pain.001 initiations that become operations. A file is
//! validated whole when it is uploaded (an invalid one creates nothing) and planned into
//! chunks of at most [`CHUNK_ITEMS`] lines of one currency (and one payment information, for a
//! pain.001); a worker then makes one operation per chunk. A pain.001's status report
//! (pain.002) is read from its operations and transactions. Each
//! chunk's operation is committed together with the file's record of it, under the file's
//! version, so a worker that dies or runs twice never loses or doubles a chunk.

pub mod csv_lines;
mod iso_xml;
pub mod pain001;
mod pain001_document;
pub mod pain002;
mod use_cases;

pub use csv_lines::{LineError, PayrollLine, COLUMNS};
pub use pain001::Initiation;
pub use use_cases::{UploadFile, STATUS_REPORTED};

use crate::access::Environment;
use crate::cause::Cause;
use crate::ids::{ApiKeyId, CustomerId, FileId, OperationId};
use crate::money::Currency;
use crate::ports::StoreError;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// The largest file taken: 5 MiB.
pub const MAX_FILE_BYTES: usize = 5 * 1024 * 1024;
/// Lines per operation (an operation's most items).
pub const CHUNK_ITEMS: usize = crate::validate::MAX_ITEMS;
/// Chunks one worker message makes before it hands the rest to the next message, so no
/// single run outlasts a function's timeout.
pub const CHUNKS_PER_RUN: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    /// Valid and stored; its chunks are waiting for the worker.
    Accepted,
    /// Some chunks have their operation.
    Processing,
    /// Every chunk has its operation (or the reason it has none).
    Completed,
}

impl FileStatus {
    pub const ALL: [FileStatus; 3] = [FileStatus::Accepted, FileStatus::Processing, FileStatus::Completed];

    pub fn as_str(self) -> &'static str {
        match self {
            FileStatus::Accepted => "accepted",
            FileStatus::Processing => "processing",
            FileStatus::Completed => "completed",
        }
    }
}

/// What a file is written in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileFormat {
    /// A payroll CSV (`text/csv`).
    #[default]
    Csv,
    /// An ISO 20022 customer credit transfer initiation (`application/xml`).
    Pain001,
}

impl FileFormat {
    pub fn content_type(self) -> &'static str {
        match self {
            FileFormat::Csv => "text/csv",
            FileFormat::Pain001 => "application/xml",
        }
    }
}

/// The lines of one currency, counted and summed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurrencyTotal {
    pub currency: Currency,
    pub lines: usize,
    pub amount: i64,
}

/// Up to [`CHUNK_ITEMS`] lines of one currency that fit one operation: one operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// 1-based, in the order the worker makes them.
    pub number: usize,
    /// The lines' group: a pain.001's payment information, by its index.
    #[serde(default, skip_serializing_if = "is_first")]
    pub group: usize,
    /// That payment information's `PmtInfId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_information: Option<String>,
    pub currency: Currency,
    /// Which of the currency's lines: `lines` of them from the `offset`-th (0-based).
    pub offset: usize,
    pub lines: usize,
    pub amount: i64,
    pub operation_id: Option<OperationId>,
    /// Why no operation was made (the customer, key or workflow stopped working meanwhile).
    pub refused: Option<String>,
}

impl Chunk {
    pub fn is_done(&self) -> bool {
        self.operation_id.is_some() || self.refused.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct File {
    pub id: FileId,
    pub customer_id: CustomerId,
    /// The workflow every chunk's operation goes through.
    pub workflow: String,
    pub status: FileStatus,
    #[serde(default)]
    pub format: FileFormat,
    /// A pain.001's group header and payment informations, for its status report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiation: Option<Initiation>,
    /// The rail a pain.001's payouts go to (a CSV names one on each line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail: Option<String>,
    /// SHA-256 of the bytes (hex): the same bytes again are a duplicate.
    pub sha256: String,
    pub size: usize,
    pub line_count: usize,
    pub totals: Vec<CurrencyTotal>,
    pub chunks: Vec<Chunk>,
    /// The key whose authority the chunks' operations are made with.
    pub api_key_id: ApiKeyId,
    pub created_by: String,
    pub cause: Cause,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    pub environment: Environment,
    pub version: u64,
}

fn is_first(group: &usize) -> bool {
    *group == 0
}

impl File {
    /// Where the bytes are kept (an S3 key, a path under the data directory).
    pub fn blob_key(&self) -> String {
        match self.format {
            FileFormat::Csv => format!("files/{}.csv", self.id),
            FileFormat::Pain001 => format!("files/{}.xml", self.id),
        }
    }

    /// What makes a second upload of this file a duplicate: a CSV's bytes (their SHA-256), a
    /// pain.001's `MsgId` (ISO 20022 keeps it unique per sender), as a digest of the same form.
    pub fn duplicate_key(&self) -> String {
        duplicate_key(self.initiation.as_ref(), &self.sha256)
    }
}

/// The [`File::duplicate_key`] of a file with these bytes' digest and this initiation.
pub fn duplicate_key(initiation: Option<&Initiation>, sha256: &str) -> String {
    use sha2::{Digest, Sha256};
    match initiation {
        Some(initiation) => hex::encode(Sha256::digest(format!("pain.001 MsgId {}", initiation.message_id))),
        None => sha256.to_owned(),
    }
}

/// What a chunk's items may take in its operation's stored document: the operation's limit
/// less room for everything else it holds (ids, causes, metadata, approvals).
const CHUNK_ITEM_BYTES: usize = crate::validate::MAX_OPERATION_BYTES - 32 * 1024;

/// What `line` takes as an item of a stored operation, with the room its transaction id
/// will take (as `validate::check_operation_size` counts it).
fn stored_item_bytes(line: &PayrollLine) -> usize {
    let item = crate::operations::Item {
        id: crate::ids::ItemId::from("itm_00000000000000000000000000"),
        beneficiary: Some(line.beneficiary.clone()),
        destination: line.destination.clone(),
        amount: line.amount,
        reference: line.reference.clone(),
        end_to_end_id: line.end_to_end_id.clone(),
        instruction_id: line.instruction_id.clone(),
        transaction_id: None,
    };
    serde_json::to_vec(&item).map_or(usize::MAX / 2, |doc| doc.len() + 1) + 64
}

/// Plans `lines` into chunks: per group (in order) and currency (in the order each first
/// appears in it), runs in file order of at most [`CHUNK_ITEMS`] lines whose items fit one stored operation (long
/// references make smaller chunks). The worker reads the same plan back from the bytes.
pub fn plan(lines: &[PayrollLine]) -> (Vec<CurrencyTotal>, Vec<Chunk>) {
    let mut totals: Vec<CurrencyTotal> = vec![];
    for line in lines {
        match totals.iter_mut().find(|t| t.currency == line.currency) {
            Some(total) => {
                total.lines += 1;
                total.amount += line.amount.minor_units();
            }
            None => totals.push(CurrencyTotal {
                currency: line.currency.clone(),
                lines: 1,
                amount: line.amount.minor_units(),
            }),
        }
    }
    let mut groups: Vec<(usize, &Currency)> = vec![];
    for line in lines {
        if !groups.contains(&(line.group, &line.currency)) {
            groups.push((line.group, &line.currency));
        }
    }
    groups.sort_by_key(|(group, _)| *group);
    let mut chunks: Vec<Chunk> = vec![];
    for (group, currency) in groups {
        let mut bytes = 0;
        let of_group = lines.iter().filter(|l| l.group == group && &l.currency == currency);
        for (position, line) in of_group.enumerate() {
            let size = stored_item_bytes(line);
            let open = chunks.last_mut().filter(|c| {
                c.group == group && &c.currency == currency && c.lines < CHUNK_ITEMS && bytes + size <= CHUNK_ITEM_BYTES
            });
            match open {
                Some(chunk) => {
                    chunk.lines += 1;
                    chunk.amount += line.amount.minor_units();
                    bytes += size;
                }
                None => {
                    chunks.push(Chunk {
                        number: chunks.len() + 1,
                        group,
                        payment_information: None,
                        currency: currency.clone(),
                        offset: position,
                        lines: 1,
                        amount: line.amount.minor_units(),
                        operation_id: None,
                        refused: None,
                    });
                    bytes = size;
                }
            }
        }
    }
    (totals, chunks)
}

/// The lines of `chunk`, as [`plan`] cut them.
pub fn chunk_lines<'a>(lines: &'a [PayrollLine], chunk: &Chunk) -> Vec<&'a PayrollLine> {
    lines
        .iter()
        .filter(|l| l.group == chunk.group && l.currency == chunk.currency)
        .skip(chunk.offset)
        .take(chunk.lines)
        .collect()
}

/// Which files a list returns: newest first, a customer's (or every customer's).
#[derive(Debug, Clone, Default)]
pub struct FileQuery {
    pub customer_id: Option<CustomerId>,
    pub starting_after: Option<FileId>,
    pub limit: usize,
}

/// The store's port for files.
#[async_trait]
pub trait FileStore: Send + Sync {
    async fn file(&self, id: &FileId) -> Result<Option<File>, StoreError>;
    /// Files, newest first.
    async fn files(&self, query: &FileQuery) -> Result<Vec<File>, StoreError>;
    /// The file of `customer` with this [`File::duplicate_key`] (its bytes' SHA-256, or its
    /// `MsgId`'s digest), if one was uploaded.
    async fn file_with_digest(&self, customer: &CustomerId, sha256: &str) -> Result<Option<FileId>, StoreError>;
}

/// Where bytes too large for a message are kept (uploaded files, oversized answers): S3 in
/// the cloud, the data directory locally.
#[async_trait]
pub trait Blobs: Send + Sync {
    async fn put(&self, key: &str, content_type: &str, bytes: Vec<u8>) -> Result<(), crate::ports::BlobError>;
    /// The bytes under `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, crate::ports::BlobError>;
    /// A URL that reads `key` without credentials for `valid_for`, where the store can give
    /// one (S3's presigned GET); none locally, where nothing needs it.
    async fn link(&self, key: &str, valid_for: time::Duration) -> Result<Option<String>, crate::ports::BlobError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(currencies: &[(&str, usize)]) -> Vec<PayrollLine> {
        let mut csv = COLUMNS.join(",") + "\n";
        for (currency, count) in currencies {
            for i in 0..*count {
                csv += &format!("rut,{i},psp-local:sandbox,acct-{i},{},{currency},\n", i + 1);
            }
        }
        csv_lines::parse(csv.as_bytes(), &|_| true).unwrap()
    }

    #[test]
    fn lines_with_long_fields_make_smaller_chunks_that_fit_an_operation() {
        let long = "r".repeat(140);
        let mut csv = COLUMNS.join(",") + "\n";
        for i in 0..1000 {
            csv += &format!("rut,{:0>64},psp-local:sandbox,{:0>64},{},CLP,{long}\n", i, i, i + 1);
        }
        let lines = csv_lines::parse(csv.as_bytes(), &|_| true).unwrap();
        let (_, chunks) = plan(&lines);
        assert!(chunks.len() > 1, "a thousand long lines do not fit one operation");
        for chunk in &chunks {
            let items = chunk_lines(&lines, chunk)
                .iter()
                .map(|l| stored_item_bytes(l))
                .sum::<usize>();
            assert!(items <= CHUNK_ITEM_BYTES, "{items}");
        }
        assert_eq!(chunks.iter().map(|c| c.lines).sum::<usize>(), 1000);
    }

    #[test]
    fn chunks_hold_at_most_a_thousand_lines_of_one_currency_and_cover_every_line_once() {
        let lines = lines(&[("CLP", 2500), ("USD", 3), ("CLP", 1)]);
        let (totals, chunks) = plan(&lines);
        assert_eq!(totals.len(), 2);
        assert_eq!((totals[0].lines, totals[1].lines), (2501, 3));
        let shape: Vec<(usize, &str, usize)> = chunks.iter().map(|c| (c.number, c.currency.code(), c.lines)).collect();
        assert_eq!(
            shape,
            [(1, "CLP", 1000), (2, "CLP", 1000), (3, "CLP", 501), (4, "USD", 3)]
        );
        let mut seen: Vec<usize> = chunks
            .iter()
            .flat_map(|c| chunk_lines(&lines, c).into_iter().map(|l| l.line))
            .collect();
        seen.sort();
        assert_eq!(seen, (2..=lines.len() + 1).collect::<Vec<_>>());
        for chunk in &chunks {
            let sum: i64 = chunk_lines(&lines, chunk).iter().map(|l| l.amount.minor_units()).sum();
            assert_eq!(sum, chunk.amount);
        }
    }
}
