//! A payroll file's lines, read with the `csv` crate and each validated by the rules of an
//! operation's item. Every error of the file is reported at once, with its line and column.

use crate::error::DomainError;
use crate::money::{Amount, Currency};
use crate::operations::{Beneficiary, Destination, OperationType};
use crate::validate::{BeneficiaryInput, DestinationInput, ItemInput};
use serde::{Deserialize, Serialize};

/// The header of a payroll file (in any order).
pub const COLUMNS: [&str; 7] = [
    "beneficiary_id_type",
    "beneficiary_id",
    "rail",
    "account",
    "amount",
    "currency",
    "reference",
];

/// The most errors one answer lists; the count says how many there were.
pub const MAX_REPORTED_ERRORS: usize = 1000;

/// One thing wrong with a file: where (line 1 is the header), and what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineError {
    pub line: usize,
    pub column: Option<String>,
    pub code: String,
    pub message: String,
}

impl LineError {
    fn new(line: usize, column: Option<&str>, code: &str, message: impl Into<String>) -> LineError {
        LineError {
            line,
            column: column.map(Into::into),
            code: code.into(),
            message: message.into(),
        }
    }
}

/// A valid line of a payroll file: one payout item.
#[derive(Debug, Clone, PartialEq)]
pub struct PayrollLine {
    /// Its line in the file (the header is line 1).
    pub line: usize,
    pub beneficiary: Beneficiary,
    pub destination: Destination,
    pub amount: Amount,
    pub currency: Currency,
    pub reference: Option<String>,
}

impl PayrollLine {
    /// The line as an operation's item, as `POST /v1/operations` takes it.
    pub fn item(&self) -> ItemInput {
        ItemInput {
            beneficiary: Some(BeneficiaryInput {
                id_type: Some(self.beneficiary.id_type.clone()),
                id: Some(self.beneficiary.id.clone()),
            }),
            destination: Some(DestinationInput {
                rail: Some(self.destination.rail.clone()),
                account: Some(self.destination.account.clone()),
                account_id: None,
            }),
            amount: Some(self.amount.minor_units()),
            reference: self.reference.clone(),
        }
    }
}

/// A cell a spreadsheet would run as a formula (`=cmd|…`, `+1+1`, `@SUM(…)`, `-2+3`).
pub fn is_formula_like(cell: &str) -> bool {
    cell.starts_with(['=', '+', '-', '@', '\t', '\r'])
}

/// Reads and validates every line of `bytes`; the lines if all are valid, else every error
/// (up to [`MAX_REPORTED_ERRORS`]) and how many there were.
pub fn parse(bytes: &[u8], known_rail: &dyn Fn(&str) -> bool) -> Result<Vec<PayrollLine>, (Vec<LineError>, usize)> {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => {
            let line = 1 + bytes[..error.valid_up_to()].iter().filter(|b| **b == b'\n').count();
            let refusal = LineError::new(line, None, "invalid_encoding", "The file is not UTF-8 text.");
            return Err((vec![refusal], 1));
        }
    };
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err((vec![LineError::new(1, None, "empty_file", "The file is empty.")], 1));
    }
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .has_headers(true)
        .from_reader(text.as_bytes());
    let mut errors = Errors::default();
    let header: Vec<String> = match reader.headers() {
        Ok(header) => header.iter().map(|h| h.trim().to_owned()).collect(),
        Err(error) => {
            errors.push(LineError::new(
                1,
                None,
                "invalid_csv",
                format!("Not a CSV header: {error}."),
            ));
            return Err(errors.finish());
        }
    };
    let positions = match column_positions(&header) {
        Ok(positions) => positions,
        Err(refusals) => {
            refusals.into_iter().for_each(|e| errors.push(e));
            return Err(errors.finish());
        }
    };
    let mut lines = vec![];
    let mut lines_read = LineCounter::new(text);
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {
                let line = lines_read.line_at(record.position().map_or(0, |p| p.byte() as usize));
                if record.len() != header.len() {
                    errors.push(LineError::new(
                        line,
                        None,
                        "wrong_field_count",
                        format!("The line has {} fields; the header has {}.", record.len(), header.len()),
                    ));
                    continue;
                }
                let cell = |column: usize| record.get(positions[column]).unwrap_or_default();
                match read_line(line, &cell, known_rail) {
                    Ok(valid) => lines.push(valid),
                    Err(refusals) => refusals.into_iter().for_each(|e| errors.push(e)),
                }
            }
            Err(error) => {
                let line = lines_read.line_at(error.position().map_or(0, |p| p.byte() as usize));
                errors.push(LineError::new(line, None, "invalid_csv", format!("Not CSV: {error}.")));
                break;
            }
        }
    }
    if lines.is_empty() && errors.total == 0 {
        errors.push(LineError::new(
            2,
            None,
            "empty_file",
            "The file has a header and no lines.",
        ));
    }
    if errors.total > 0 {
        return Err(errors.finish());
    }
    Ok(lines)
}

/// Lines of a text counted as the reader moves forward (records come in order, so each byte
/// is counted once).
struct LineCounter<'t> {
    bytes: &'t [u8],
    counted_to: usize,
    newlines: usize,
}

impl<'t> LineCounter<'t> {
    fn new(text: &'t str) -> LineCounter<'t> {
        LineCounter {
            bytes: text.as_bytes(),
            counted_to: 0,
            newlines: 0,
        }
    }

    /// The line (1-based) of a record the csv crate says starts at `offset` (after a CRLF it
    /// points at the LF, which belongs to the line before).
    fn line_at(&mut self, offset: usize) -> usize {
        let start = offset.min(self.bytes.len());
        let skipped = self.bytes[start..]
            .iter()
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .count();
        let end = (start + skipped).max(self.counted_to);
        self.newlines += self.bytes[self.counted_to..end].iter().filter(|b| **b == b'\n').count();
        self.counted_to = end;
        1 + self.newlines
    }
}

/// Errors as they are found: the first [`MAX_REPORTED_ERRORS`] kept, all counted.
#[derive(Default)]
struct Errors {
    kept: Vec<LineError>,
    total: usize,
}

impl Errors {
    fn push(&mut self, error: LineError) {
        self.total += 1;
        if self.kept.len() < MAX_REPORTED_ERRORS {
            self.kept.push(error);
        }
    }

    fn finish(self) -> (Vec<LineError>, usize) {
        (self.kept, self.total)
    }
}

/// Where each of [`COLUMNS`] is in the header; a missing, repeated or unknown column refused.
fn column_positions(header: &[String]) -> Result<Vec<usize>, Vec<LineError>> {
    let mut refusals = vec![];
    for (i, name) in header.iter().enumerate() {
        if !COLUMNS.contains(&name.as_str()) {
            let shown: String = name.chars().take(64).collect();
            refusals.push(LineError::new(
                1,
                Some(&shown),
                "unexpected_column",
                format!(
                    "'{shown}' is not a column of a payroll file; the columns are {}.",
                    COLUMNS.join(",")
                ),
            ));
        } else if header[..i].contains(name) {
            refusals.push(LineError::new(
                1,
                Some(name),
                "duplicate_column",
                format!("'{name}' appears twice."),
            ));
        }
    }
    let mut positions = vec![];
    for column in COLUMNS {
        match header.iter().position(|h| h == column) {
            Some(at) => positions.push(at),
            None => refusals.push(LineError::new(
                1,
                Some(column),
                "missing_column",
                format!("The header lacks the column '{column}'."),
            )),
        }
    }
    if refusals.is_empty() {
        Ok(positions)
    } else {
        Err(refusals)
    }
}

/// One line's cells (by column index in [`COLUMNS`]) as a payout item, or what is wrong.
fn read_line<'c>(
    line: usize,
    cell: &dyn Fn(usize) -> &'c str,
    known_rail: &dyn Fn(&str) -> bool,
) -> Result<PayrollLine, Vec<LineError>> {
    let mut refusals = vec![];
    for (column, name) in COLUMNS.iter().enumerate() {
        if is_formula_like(cell(column)) {
            refusals.push(LineError::new(
                line,
                Some(name),
                "formula_not_allowed",
                "A cell must not start with '=', '+', '-', '@', a tab or a carriage return (a spreadsheet would run it as a formula).",
            ));
        }
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }
    let text = |column: usize| Some(cell(column).to_owned()).filter(|c| !c.is_empty());
    // An unreadable amount is reported here; the item is then checked with a stand-in, so
    // its other fields are still reported and the amount not twice.
    let amount = match cell(4) {
        "" => None,
        raw => Some(raw.parse::<i64>().unwrap_or_else(|_| {
            refusals.push(LineError::new(
                line,
                Some("amount"),
                "invalid_amount",
                "amount is an integer in minor units (no decimals, no separators).",
            ));
            1
        })),
    };
    let currency = match cell(5) {
        "" => {
            refusals.push(LineError::new(
                line,
                Some("currency"),
                "parameter_missing",
                "currency is required.",
            ));
            None
        }
        code => Currency::parse(code).or_else(|| {
            refusals.push(LineError::new(
                line,
                Some("currency"),
                "invalid_currency",
                format!(
                    "'{}' is not an active ISO 4217 currency code.",
                    code.chars().take(16).collect::<String>()
                ),
            ));
            None
        }),
    };
    let input = ItemInput {
        beneficiary: Some(BeneficiaryInput {
            id_type: text(0),
            id: text(1),
        }),
        destination: Some(DestinationInput {
            rail: text(2),
            account: text(3),
            account_id: None,
        }),
        amount,
        reference: text(6),
    };
    match input.validate("item", OperationType::Payout, known_rail) {
        Ok(item) if refusals.is_empty() => Ok(PayrollLine {
            line,
            beneficiary: item.beneficiary,
            destination: item.destination,
            amount: item.amount,
            currency: currency.expect("a valid line has its currency"),
            reference: item.reference,
        }),
        Ok(_) => Err(refusals),
        Err(DomainError::InvalidRequest { code, param, message }) => {
            refusals.push(LineError::new(line, param.as_deref().map(column_of), code, message));
            Err(refusals)
        }
        Err(other) => {
            refusals.push(LineError::new(line, None, "invalid_line", other.to_string()));
            Err(refusals)
        }
    }
}

/// The column an item's parameter comes from.
fn column_of(param: &str) -> &'static str {
    match param.strip_prefix("item.").unwrap_or(param) {
        "beneficiary.id_type" => "beneficiary_id_type",
        "beneficiary.id" | "beneficiary" => "beneficiary_id",
        "destination.rail" | "destination" => "rail",
        "destination.account" => "account",
        "amount" => "amount",
        _ => "reference",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(csv: &str) -> Vec<(usize, Option<String>, String)> {
        let (errors, _) = parse(csv.as_bytes(), &|rail| rail == "psp-local:sandbox").unwrap_err();
        errors.into_iter().map(|e| (e.line, e.column, e.code)).collect()
    }

    const HEADER: &str = "beneficiary_id_type,beneficiary_id,rail,account,amount,currency,reference\n";

    #[test]
    fn a_valid_file_reads_every_line_with_its_line_number() {
        let csv = format!(
            "{HEADER}rut,1-9,psp-local:sandbox,acct-1,1500,CLP,May\nrut,2-7,psp-local:sandbox,\"acct,2\",20,USD,\n"
        );
        let lines = parse(csv.as_bytes(), &|_| true).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0].line, lines[0].amount.minor_units()), (2, 1500));
        assert_eq!(lines[1].destination.account, "acct,2");
        assert_eq!(lines[1].reference, None);
        // Columns in another order, a byte-order mark and CRLF line ends are read the same.
        let reordered = "\u{FEFF}currency,amount,reference,account,rail,beneficiary_id,beneficiary_id_type\r\nCLP,1500,May,acct-1,psp-local:sandbox,1-9,rut\r\n";
        let again = parse(reordered.as_bytes(), &|_| true).unwrap();
        assert_eq!(again[0], lines[0]);
    }

    #[test]
    fn every_error_is_reported_at_once_with_line_and_column() {
        let csv = format!(
            "{HEADER}rut,1-9,psp-local:sandbox,acct-1,15.5,CLP,\n\
             rut,,psp-local:nowhere,acct-1,10,XXX,\n\
             rut,1-9,psp-local:sandbox,acct-1,10\n\
             rut,1-9,psp-local:sandbox,acct-1,0,CLP,\n\
             rut,1-9,psp-local:sandbox,acct-1,10,CLP,=cmd|' /C calc'!A0\n"
        );
        assert_eq!(
            errors(&csv),
            [
                (2, Some("amount".into()), "invalid_amount".into()),
                (3, Some("currency".into()), "invalid_currency".into()),
                (3, Some("beneficiary_id".into()), "parameter_missing".into()),
                (4, None, "wrong_field_count".into()),
                (5, Some("amount".into()), "amount_out_of_range".into()),
                (6, Some("reference".into()), "formula_not_allowed".into()),
            ]
        );
    }

    #[test]
    fn a_file_that_is_no_payroll_is_refused_as_a_whole() {
        assert_eq!(errors(""), [(1, None, "empty_file".into())]);
        assert_eq!(errors(HEADER), [(2, None, "empty_file".into())]);
        let missing = errors("beneficiary_id_type,beneficiary_id,rail,account,amount,currency\n");
        assert_eq!(missing, [(1, Some("reference".into()), "missing_column".into())]);
        let extra = errors(&HEADER.replace('\n', ",iban\n"));
        assert_eq!(extra, [(1, Some("iban".into()), "unexpected_column".into())]);
        let (not_text, _) = parse(b"beneficiary_id_type\n\xff\xfe", &|_| true).unwrap_err();
        assert_eq!((not_text[0].line, not_text[0].code.as_str()), (2, "invalid_encoding"));
        assert_eq!(errors("{\"items\": []}")[0].2, "unexpected_column");
    }

    #[test]
    fn errors_past_the_reported_limit_are_counted() {
        let csv = format!(
            "{HEADER}{}",
            "rut,1,psp-local:sandbox,a,x,CLP,\n".repeat(MAX_REPORTED_ERRORS + 5)
        );
        let (kept, total) = parse(csv.as_bytes(), &|_| true).unwrap_err();
        assert_eq!((kept.len(), total), (MAX_REPORTED_ERRORS, MAX_REPORTED_ERRORS + 5));
    }
}
