//! A payroll file's lines, read with the `csv` crate and each validated by the rules of an
//! operation's item. Every error of the file is reported at once, with its line and column.

use crate::error::DomainError;
use crate::money::{Amount, Currency};
use crate::operations::{Beneficiary, Destination};
use crate::validate::{item_field, BeneficiaryInput, DestinationInput, ItemInput};
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

/// One thing wrong with a file: where (line 1 is a CSV's header), and what. An XML file's
/// error also names the element's path and the payment information and transaction it is in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineError {
    pub line: usize,
    pub column: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The `PmtInfId` of the payment information the element is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_information: Option<String>,
    /// The `EndToEndId` of the transaction the element is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_to_end_id: Option<String>,
    pub code: String,
    pub message: String,
}

impl LineError {
    pub(super) fn new(line: usize, column: Option<&str>, code: &str, message: impl Into<String>) -> LineError {
        LineError {
            line,
            column: column.map(Into::into),
            path: None,
            payment_information: None,
            end_to_end_id: None,
            code: code.into(),
            message: message.into(),
        }
    }
}

/// A valid line of a payroll file (or transaction of a pain.001): one payout item.
#[derive(Debug, Clone, PartialEq)]
pub struct PayrollLine {
    /// Its line in the file (the header is line 1).
    pub line: usize,
    /// Lines are chunked within their group: a pain.001's payment information (by its index),
    /// a CSV's one group.
    pub group: usize,
    pub end_to_end_id: Option<String>,
    pub instruction_id: Option<String>,
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
            end_to_end_id: self.end_to_end_id.clone(),
            instruction_id: self.instruction_id.clone(),
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
                // A quote left open runs its cell on into the next lines (to the end of the
                // file): say so, rather than count fields or characters that were never meant.
                if let Some(at) = record.iter().position(|cell| cell.contains(['\n', '\r'])) {
                    errors.push(LineError::new(
                        line,
                        header.get(at).map(String::as_str),
                        "line_break_in_cell",
                        "This cell runs on past the end of its line: is a closing quote missing? Each cell is one line.",
                    ));
                    continue;
                }
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
pub(super) struct Errors {
    kept: Vec<LineError>,
    total: usize,
}

impl Errors {
    pub(super) fn push(&mut self, error: LineError) {
        self.total += 1;
        if self.kept.len() < MAX_REPORTED_ERRORS {
            self.kept.push(error);
        }
    }

    pub(super) fn finish(self) -> (Vec<LineError>, usize) {
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

/// One line's cells (by column index in [`COLUMNS`]) as a payout item, or everything wrong
/// with it.
fn read_line<'c>(
    line: usize,
    cell: &'c dyn Fn(usize) -> &'c str,
    known_rail: &dyn Fn(&str) -> bool,
) -> Result<PayrollLine, Vec<LineError>> {
    let mut cells = LineCells {
        line,
        cell,
        refusals: vec![],
    };
    let id_type = cells.check("beneficiary_id_type", item_field::beneficiary_id_type);
    let beneficiary_id = cells.check("beneficiary_id", item_field::beneficiary_id);
    let rail = cells.check("rail", |value, column| item_field::rail(value, column, known_rail));
    let account = cells.check("account", item_field::account);
    let amount = cells.check("amount", |value, column| {
        let raw = value.ok_or_else(|| DomainError::missing(column))?;
        let minor_units = raw.parse::<i64>().map_err(|_| {
            DomainError::invalid(
                column,
                "invalid_amount",
                "amount is an integer in minor units (no decimals, no separators).",
            )
        })?;
        item_field::amount(Some(minor_units), column)
    });
    let currency = cells.check("currency", |value, column| {
        let code = value.ok_or_else(|| DomainError::missing(column))?;
        Currency::parse(&code).ok_or_else(|| {
            DomainError::invalid(
                column,
                "invalid_currency",
                format!(
                    "'{}' is not an active ISO 4217 currency code.",
                    code.chars().take(16).collect::<String>()
                ),
            )
        })
    });
    let reference = cells.check("reference", item_field::reference);
    match (id_type, beneficiary_id, rail, account, amount, currency, reference) {
        (Some(id_type), Some(id), Some(rail), Some(account), Some(amount), Some(currency), Some(reference))
            if cells.refusals.is_empty() =>
        {
            Ok(PayrollLine {
                line,
                group: 0,
                end_to_end_id: None,
                instruction_id: None,
                beneficiary: Beneficiary { id_type, id },
                destination: Destination {
                    rail,
                    account,
                    account_id: None,
                },
                amount,
                currency,
                reference,
            })
        }
        _ => Err(cells.refusals),
    }
}

/// A line's cells, each checked on its own so that the line reports everything wrong with it.
struct LineCells<'c> {
    line: usize,
    cell: &'c dyn Fn(usize) -> &'c str,
    refusals: Vec<LineError>,
}

impl LineCells<'_> {
    /// The cell of `column` as `check` reads it (an empty cell as none), or `None` with why
    /// recorded. A formula-like cell is refused as such, and not read further.
    fn check<T>(
        &mut self,
        column: &'static str,
        check: impl FnOnce(Option<String>, &str) -> Result<T, DomainError>,
    ) -> Option<T> {
        let at = COLUMNS.iter().position(|c| *c == column).expect("one of the columns");
        let raw = (self.cell)(at);
        if is_formula_like(raw) {
            self.refusals.push(LineError::new(
                self.line,
                Some(column),
                "formula_not_allowed",
                "A cell must not start with '=', '+', '-', '@', a tab or a carriage return (a spreadsheet would run it as a formula).",
            ));
            return None;
        }
        let value = Some(raw.to_owned()).filter(|c| !c.is_empty());
        match check(value, column) {
            Ok(valid) => Some(valid),
            Err(error) => {
                let (code, message) = match error {
                    DomainError::InvalidRequest { code, message, .. } => (code, message),
                    other => ("invalid_line", other.to_string()),
                };
                self.refusals
                    .push(LineError::new(self.line, Some(column), code, message));
                None
            }
        }
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
             rut,1-9,psp-local:sandbox,acct-1,10,CLP,=cmd|' /C calc'!A0\n\
             ru t,1-9,psp-local:sandbox,@acct,ten,CLP,-x\n"
        );
        assert_eq!(
            errors(&csv),
            [
                (2, Some("amount".into()), "invalid_amount".into()),
                // A line reports everything wrong with it, in the header's order.
                (3, Some("beneficiary_id".into()), "parameter_missing".into()),
                (3, Some("rail".into()), "unknown_rail".into()),
                (3, Some("currency".into()), "invalid_currency".into()),
                (4, None, "wrong_field_count".into()),
                (5, Some("amount".into()), "amount_out_of_range".into()),
                (6, Some("reference".into()), "formula_not_allowed".into()),
                // A formula-like cell does not hide the line's other errors.
                (7, Some("beneficiary_id_type".into()), "invalid_id_type".into()),
                (7, Some("account".into()), "formula_not_allowed".into()),
                (7, Some("amount".into()), "invalid_amount".into()),
                (7, Some("reference".into()), "formula_not_allowed".into()),
            ]
        );
        let (reported, _) = parse(csv.as_bytes(), &|_| false).unwrap_err();
        let missing_id = reported.iter().find(|e| e.line == 3).unwrap();
        assert_eq!(
            missing_id.message, "Missing required param: beneficiary_id.",
            "named by its column"
        );
    }

    #[test]
    fn a_quote_left_open_is_named_where_it_opened() {
        let csv = format!(
            "{HEADER}rut,1-9,psp-local:sandbox,acct-1,10,CLP,ok\n\
             rut,1-9,psp-local:sandbox,\"acct-1,10,CLP,May\n\
             rut,2-7,psp-local:sandbox,acct-2,20,CLP,June\n"
        );
        assert_eq!(errors(&csv), [(3, Some("account".into()), "line_break_in_cell".into())]);
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
