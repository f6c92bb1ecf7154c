//! `GET /v1/reports/{operations,transactions,movements}`: a period's rows streamed page by
//! page (memory stays that of one page, whatever the period holds), as CSV or JSON, totals at
//! the end.

use crate::error::ApiError;
use crate::extract::query_pairs;
use crate::App;
use axum::body::{Body, Bytes};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use futures_util::{stream, StreamExt};
use ops_domain::access::Principal;
use ops_domain::ids::{CustomerId, IdKind};
use ops_domain::ledger::{Direction, Movement};
use ops_domain::operations::Operation;
use ops_domain::reports::{ReportPage, ReportQuery, Totals};
use ops_domain::transactions::Transaction;
use ops_domain::DomainError;
use std::future::Future;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// What a report is of: its columns, a row's cells, and the total a row adds to.
pub trait Row: Send + 'static {
    const COLUMNS: &'static [&'static str];
    fn cells(&self) -> Vec<Cell>;
    /// Its status, currency and amount.
    fn total(&self) -> (&str, &str, i64);
}

/// One cell of a row, typed as the API's objects type it: JSON writes an amount or a count
/// as a number and a value the row lacks as `null`; CSV writes the text, the digits, or
/// nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Text(String),
    Number(i64),
    Empty,
}

impl Cell {
    fn text(value: impl Into<String>) -> Cell {
        Cell::Text(value.into())
    }

    fn optional<T: ToString>(value: Option<&T>) -> Cell {
        value.map_or(Cell::Empty, |v| Cell::Text(v.to_string()))
    }

    fn time(value: Option<&OffsetDateTime>) -> Cell {
        value.map_or(Cell::Empty, |t| Cell::Text(t.format(&Rfc3339).unwrap_or_default()))
    }

    /// The cell as a spreadsheet will show it, never run it: see [`neutralised`].
    fn csv(self) -> String {
        match self {
            Cell::Text(text) => neutralised(&text),
            Cell::Number(n) => n.to_string(),
            Cell::Empty => String::new(),
        }
    }
}

/// Text with a `'` before whatever a spreadsheet would run as a formula, in any locale: at the
/// cell's start, or at the start of what a locale splitting on `;`, a tab or a line break would
/// make a cell of its own (`x;=1+1`), spaces before it included (` =1+1`). JSON keeps the
/// text as it is.
fn neutralised(text: &str) -> String {
    const SPLITS: [char; 5] = [',', ';', '\t', '\n', '\r'];
    const FORMULA: [char; 4] = ['=', '+', '-', '@'];
    let mut shown = String::with_capacity(text.len() + 1);
    // A tab or a carriage return leading a cell lets a formula in too.
    if text.starts_with(['\t', '\r']) {
        shown.push('\'');
    }
    let mut at_cell_start = true;
    for c in text.chars() {
        if at_cell_start && FORMULA.contains(&c) {
            shown.push('\'');
        }
        at_cell_start = SPLITS.contains(&c) || (at_cell_start && c == ' ');
        shown.push(c);
    }
    shown
}

impl serde::Serialize for Cell {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Cell::Text(text) => serializer.serialize_str(text),
            Cell::Number(n) => serializer.serialize_i64(*n),
            Cell::Empty => serializer.serialize_none(),
        }
    }
}

impl Row for Operation {
    const COLUMNS: &'static [&'static str] = &[
        "id",
        "created_at",
        "customer_id",
        "type",
        "status",
        "currency",
        "total_amount",
        "items",
        "workflow",
        "file_id",
        "cause_code",
        "cause_message",
    ];

    fn cells(&self) -> Vec<Cell> {
        vec![
            Cell::text(self.id.as_str()),
            Cell::time(Some(&self.created_at)),
            Cell::text(self.customer_id.as_str()),
            Cell::text(self.kind.as_str()),
            Cell::text(self.status.as_str()),
            Cell::text(self.currency.code()),
            Cell::Number(self.total_amount),
            Cell::Number(self.items.len() as i64),
            Cell::text(self.workflow.as_str()),
            Cell::optional(self.file_id.as_ref()),
            Cell::text(self.cause.code.as_str()),
            Cell::text(self.cause.message.as_str()),
        ]
    }

    fn total(&self) -> (&str, &str, i64) {
        (self.status.as_str(), self.currency.code(), self.total_amount)
    }
}

impl Row for Transaction {
    const COLUMNS: &'static [&'static str] = &[
        "id",
        "created_at",
        "customer_id",
        "operation_id",
        "rail",
        "rail_reference",
        "status",
        "currency",
        "amount",
        "confirmed_at",
        "cause_code",
        "cause_message",
    ];

    fn cells(&self) -> Vec<Cell> {
        vec![
            Cell::text(self.id.as_str()),
            Cell::time(Some(&self.created_at)),
            Cell::text(self.customer_id.as_str()),
            Cell::text(self.operation_id.as_str()),
            Cell::text(self.rail.as_str()),
            Cell::optional(self.rail_reference.as_ref()),
            Cell::text(self.status.as_str()),
            Cell::text(self.currency.code()),
            Cell::Number(self.amount.minor_units()),
            Cell::time(self.confirmed_at.as_ref()),
            Cell::text(self.cause.code.as_str()),
            Cell::text(self.cause.message.as_str()),
        ]
    }

    fn total(&self) -> (&str, &str, i64) {
        (self.status.as_str(), self.currency.code(), self.amount.minor_units())
    }
}

impl Row for Movement {
    const COLUMNS: &'static [&'static str] = &[
        "id",
        "created_at",
        "posted_at",
        "customer_id",
        "status",
        "currency",
        "amount",
        "debit_account_id",
        "credit_account_id",
        "operation_id",
        "transaction_id",
        "cause_code",
        "cause_message",
    ];

    fn cells(&self) -> Vec<Cell> {
        let side = |direction: Direction| {
            Cell::optional(
                self.entries
                    .iter()
                    .find(|e| e.direction == direction)
                    .map(|e| &e.account_id),
            )
        };
        vec![
            Cell::text(self.id.as_str()),
            Cell::time(Some(&self.created_at)),
            Cell::time(self.posted_at.as_ref()),
            Cell::optional(self.customer_id.as_ref()),
            Cell::text(self.status.as_str()),
            Cell::text(self.currency.code()),
            Cell::Number(self.amount().minor_units()),
            side(Direction::Debit),
            side(Direction::Credit),
            Cell::optional(self.operation_id.as_ref()),
            Cell::optional(self.transaction_id.as_ref()),
            Cell::text(self.cause.code.as_str()),
            Cell::text(self.cause.message.as_str()),
        ]
    }

    fn total(&self) -> (&str, &str, i64) {
        (self.status.as_str(), self.currency.code(), self.amount().minor_units())
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Format {
    Csv,
    Json,
}

fn csv_bytes(rows: impl IntoIterator<Item = Vec<Cell>>) -> Vec<u8> {
    let mut writer = csv::Writer::from_writer(vec![]);
    for row in rows {
        writer
            .write_record(row.into_iter().map(Cell::csv))
            .expect("writing to memory");
    }
    writer.into_inner().expect("writing to memory")
}

impl Format {
    fn content_type(self) -> &'static str {
        match self {
            Format::Csv => "text/csv; charset=utf-8",
            Format::Json => "application/json",
        }
    }

    fn head<T: Row>(self, query: &ReportQuery) -> Vec<u8> {
        match self {
            Format::Csv => csv_bytes([T::COLUMNS.iter().map(|&c| Cell::text(c)).collect()]),
            Format::Json => {
                #[derive(serde::Serialize)]
                struct Head<'a> {
                    object: &'static str,
                    from: String,
                    to: String,
                    customer_id: &'a Option<ops_domain::ids::CustomerId>,
                }
                let head = serde_json::to_string(&Head {
                    object: "report",
                    from: query.from.format(&Rfc3339).unwrap_or_default(),
                    to: query.to.format(&Rfc3339).unwrap_or_default(),
                    customer_id: &query.customer_id,
                })
                .expect("writing to memory");
                // The object's fields, then the rows as they come.
                format!("{},\"data\":[", head.trim_end_matches('}')).into_bytes()
            }
        }
    }

    fn rows<T: Row>(self, rows: &[T], first: bool) -> Vec<u8> {
        match self {
            Format::Csv => csv_bytes(rows.iter().map(Row::cells)),
            Format::Json => {
                let mut out = vec![];
                for (i, row) in rows.iter().enumerate() {
                    if !(first && i == 0) {
                        out.push(b',');
                    }
                    json_object(&mut out, T::COLUMNS, row.cells());
                }
                out
            }
        }
    }

    fn tail(self, totals: &Totals) -> Vec<u8> {
        let rows = totals.0.iter().map(|((status, currency), total)| {
            vec![
                Cell::text(status.as_str()),
                Cell::text(currency.as_str()),
                Cell::Number(total.count as i64),
                Cell::Number(total.amount),
            ]
        });
        match self {
            // A blank line, then the totals with their own header.
            Format::Csv => {
                let mut out = b"\n".to_vec();
                out.extend(csv_bytes(
                    std::iter::once(TOTAL_COLUMNS.map(Cell::text).to_vec()).chain(rows),
                ));
                out
            }
            Format::Json => {
                let mut out = b"],\"totals\":[".to_vec();
                for (i, row) in rows.enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    json_object(&mut out, &TOTAL_COLUMNS, row);
                }
                out.extend_from_slice(b"]}");
                out
            }
        }
    }
}

/// A totals line's columns, in CSV and JSON alike.
const TOTAL_COLUMNS: [&str; 4] = ["status", "currency", "count", "amount"];

/// An object with `names` as its keys, in their order (the CSV's columns), and `cells` as values.
fn json_object(out: &mut Vec<u8>, names: &[&str], cells: Vec<Cell>) {
    out.push(b'{');
    for (n, (name, cell)) in names.iter().zip(cells).enumerate() {
        if n > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, name).expect("writing to memory");
        out.push(b':');
        serde_json::to_writer(&mut *out, &cell).expect("writing to memory");
    }
    out.push(b'}');
}

/// Where the stream is: the page in hand (and whether rows were written before it).
enum Step<T> {
    Page {
        page: ReportPage<T>,
        first: bool,
        totals: Totals,
    },
    Done,
}

/// `GET /v1/reports/<rows>?from=&to=[&customer_id=][&format=csv|json]`: `read` gives the
/// pages, each below the previous page's last id.
pub async fn report<T, F, Fut>(app: App, caller: Principal, raw: Option<String>, read: F) -> Result<Response, ApiError>
where
    T: Row,
    F: Fn(App, Principal, ReportQuery, Option<String>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<ReportPage<T>, DomainError>> + Send,
{
    let mut from = None;
    let mut to = None;
    let mut customer_id = None;
    let mut format = Format::Json;
    for (name, value) in query_pairs(raw.as_deref(), &["from", "to", "customer_id", "format"])? {
        match name.as_str() {
            "from" => from = Some(ops_domain::validate::rfc3339_time(&value, &name)?),
            "to" => to = Some(ops_domain::validate::rfc3339_time(&value, &name)?),
            "customer_id" if IdKind::Customer.matches(&value) => customer_id = Some(CustomerId::from(value.as_str())),
            "customer_id" => {
                return Err(DomainError::invalid(name, "invalid_id", format!("'{value}' is not a customer id.")).into())
            }
            _ => {
                format = match value.as_str() {
                    "csv" => Format::Csv,
                    "json" => Format::Json,
                    _ => return Err(DomainError::invalid(name, "invalid_format", "format is csv or json.").into()),
                }
            }
        }
    }
    let from = from.ok_or_else(|| DomainError::missing("from"))?;
    let to = to.ok_or_else(|| DomainError::missing("to"))?;
    let query = ReportQuery::new(from, to, customer_id)?;
    // The first page before answering: a refusal is still a status code.
    let page = read(app.clone(), caller.clone(), query.clone(), None).await?;
    let head = Bytes::from(format.head::<T>(&query));
    let pages = stream::unfold(
        Step::Page {
            page,
            first: true,
            totals: Totals::default(),
        },
        move |step| {
            let (app, caller, query, read) = (app.clone(), caller.clone(), query.clone(), read.clone());
            async move {
                let Step::Page {
                    page,
                    first,
                    mut totals,
                } = step
                else {
                    return None;
                };
                for row in &page.data {
                    let (status, currency, amount) = row.total();
                    totals.add(status, currency, amount);
                }
                let mut bytes = format.rows(&page.data, first);
                let first = first && page.data.is_empty();
                let next = match page.next {
                    Some(before) => match read(app, caller, query, Some(before)).await {
                        Ok(next) => Step::Page {
                            page: next,
                            first,
                            totals,
                        },
                        Err(error) => {
                            // The status was sent; an unfinished body tells the client.
                            tracing::error!(%error, "a report stopped part way");
                            return Some((Err(std::io::Error::other(error.to_string())), Step::Done));
                        }
                    },
                    None => {
                        bytes.extend(format.tail(&totals));
                        Step::Done
                    }
                };
                Some((Ok::<_, std::io::Error>(Bytes::from(bytes)), next))
            }
        },
    );
    let body = stream::iter([Ok(head)]).chain(pages);
    Ok(([(CONTENT_TYPE, format.content_type())], Body::from_stream(body)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_a_spreadsheet_would_run_are_written_as_text() {
        let written = csv_bytes([vec![
            Cell::text("=cmd|' /C calc'!A0"),
            Cell::text("+1"),
            Cell::text("-2"),
            Cell::text("@SUM(A1)"),
            Cell::text("ok"),
            Cell::Number(-2),
            Cell::Empty,
        ]]);
        assert_eq!(
            String::from_utf8(written).unwrap(),
            "'=cmd|' /C calc'!A0,'+1,'-2,'@SUM(A1),ok,-2,\n"
        );
    }

    #[test]
    fn formulas_behind_spaces_or_another_locales_separator_are_written_as_text() {
        let written = csv_bytes([vec![
            Cell::text(" =1+1"),
            Cell::text("x;=1+1"),
            Cell::text("a, -2;\t@SUM(A1)"),
            Cell::text("pay-roll 2026-12-01"),
        ]]);
        assert_eq!(
            String::from_utf8(written).unwrap(),
            " '=1+1,x;'=1+1,\"a, '-2;\t'@SUM(A1)\",pay-roll 2026-12-01\n"
        );
    }
}
