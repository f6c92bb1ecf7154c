//! The statement a request sends: its rail, format and bytes checked, and the period it is
//! reconciled for.

use super::MAX_STATEMENT_BYTES;
use crate::error::DomainError;
use crate::rail::{Period, Statement, StatementFormat};
use crate::validate::required_text;
use base64::Engine;
use serde::Deserialize;

/// `POST /v1/reconciliations`: a statement of a rail, base64-encoded.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportStatement {
    pub rail: Option<String>,
    pub statement: Option<String>,
    /// `csv` (the rail's own, the default), `camt053`, `camt052`, `camt054`, `mt940`, `bai2` or
    /// `pain002` (a bank's status report on a file it was sent).
    pub format: Option<String>,
    /// The days the statement covers, when it does not say (or says otherwise).
    pub period: Option<PeriodParam>,
    /// Answer every line's outcome and change nothing: no transition, no work item, no
    /// reconciliation kept (the same statement can be imported afterwards).
    #[serde(default)]
    pub dry_run: bool,
}

/// A statement's bytes, checked, with the rail that is to read them.
pub(super) struct StatementFile {
    pub rail: String,
    pub adapter: std::sync::Arc<dyn crate::rail::RailAdapter>,
    pub format: StatementFormat,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeriodParam {
    pub from: Option<String>,
    pub to: Option<String>,
}

fn day_param(value: Option<String>, param: &str) -> Result<time::Date, DomainError> {
    let value = value.ok_or_else(|| DomainError::missing(param))?;
    let format = time::macros::format_description!("[year]-[month]-[day]");
    time::Date::parse(&value, &format)
        .map_err(|_| DomainError::invalid(param, "invalid_date", format!("{param} is a date: YYYY-MM-DD.")))
}

/// The period a statement is reconciled for: the request's, else the statement's own, else
/// the days its lines were booked.
pub(super) fn period_of(requested: Option<PeriodParam>, statement: &Statement) -> Result<Period, DomainError> {
    let period = match requested {
        Some(param) => Period {
            from: day_param(param.from, "period.from")?,
            to: day_param(param.to, "period.to")?,
        },
        None => match statement.period {
            Some(period) => period,
            None => {
                let days = statement.lines.iter().filter_map(|l| l.booked_on);
                match (days.clone().min(), days.max()) {
                    (Some(from), Some(to)) => Period { from, to },
                    _ => {
                        return Err(DomainError::invalid(
                            "period",
                            "period_required",
                            "The statement states no period and no booking days: send period.from and period.to.",
                        ))
                    }
                }
            }
        },
    };
    if period.to < period.from {
        return Err(DomainError::invalid(
            "period.to",
            "invalid_period",
            "period.to is before period.from.",
        ));
    }
    if (period.to - period.from).whole_days() > 31 {
        return Err(DomainError::invalid(
            "period",
            "period_too_long",
            "A statement covers at most 31 days.",
        ));
    }
    Ok(period)
}

/// The statement a command names, decoded and checked, with the adapter of its rail.
pub(super) fn checked_statement(
    command: &ImportStatement,
    rails: &crate::rail::Rails,
) -> Result<StatementFile, DomainError> {
    let rail = required_text(command.rail.clone(), "rail", 80)?;
    let adapter = rails.get(&rail).cloned().ok_or_else(|| {
        DomainError::invalid(
            "rail",
            "rail_not_served",
            format!("This deployment serves no rail '{rail}'."),
        )
    })?;
    let format = match command.format.as_deref() {
        None => StatementFormat::Csv,
        Some(format) => StatementFormat::parse(format).ok_or_else(|| {
            DomainError::invalid(
                "format",
                "invalid_format",
                "format is csv, camt053, camt052, camt054, mt940, bai2 or pain002.",
            )
        })?,
    };
    let encoded = command
        .statement
        .as_deref()
        .ok_or_else(|| DomainError::missing("statement"))?;
    let too_large = || {
        DomainError::invalid(
            "statement",
            "statement_too_large",
            format!("A statement is at most {MAX_STATEMENT_BYTES} bytes."),
        )
    };
    if encoded.len() > MAX_STATEMENT_BYTES / 3 * 4 + 4 {
        return Err(too_large());
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.as_bytes())
        .map_err(|_| DomainError::invalid("statement", "invalid_base64", "statement is the file, base64-encoded."))?;
    if bytes.is_empty() {
        return Err(DomainError::invalid(
            "statement",
            "empty_statement",
            "The statement is empty.",
        ));
    }
    if bytes.len() > MAX_STATEMENT_BYTES {
        return Err(too_large());
    }
    Ok(StatementFile {
        rail,
        adapter,
        format,
        bytes,
    })
}

/// The longest rail reference a statement line may carry: ISO 20022's references are at most
/// 35 characters, and what a line says is copied into its reconciliation, events and work
/// items, which must stay small.
pub const MAX_LINE_REFERENCE: usize = 140;

/// Refuses a statement a line of which carries a reference longer than [`MAX_LINE_REFERENCE`],
/// naming the line.
pub(super) fn check_line_references(statement: &Statement) -> Result<(), DomainError> {
    for (n, line) in statement.lines.iter().enumerate() {
        let length = line.rail_reference.as_deref().map_or(0, |r| r.chars().count());
        if length > MAX_LINE_REFERENCE {
            return Err(DomainError::invalid(
                "statement",
                "reference_too_long",
                format!(
                    "Statement line {}: its reference is {length} characters; at most {MAX_LINE_REFERENCE}.",
                    n + 1
                ),
            ));
        }
    }
    Ok(())
}
