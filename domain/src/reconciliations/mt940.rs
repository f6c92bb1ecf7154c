//! SWIFT MT940 customer statements, as banks export them: each message's `:60F:` (or `:60M:`)
//! opening balance gives the currency, each `:61:` is a line, `:62F:` closes it. Lines before a
//! message's `:20:` (a file's own headers) and `-` trailers are not part of any message. A
//! refusal names the message, the line and the column.

use crate::ids::TransactionId;
use crate::money::Currency;
use crate::rail::{BalanceKind, EntryDirection, Period, Statement, StatementBalance, StatementLine, StatementStatus};
use time::{Date, Month};

/// What is wrong, and where: the message (from 1), and the line and column if known.
struct Located {
    message: usize,
    place: Option<(usize, usize)>,
    what: String,
}

impl Located {
    fn at(message: usize, line: usize, column: usize, what: String) -> Located {
        Located {
            message,
            place: Some((line, column)),
            what,
        }
    }

    fn whole(message: usize, what: &str) -> Located {
        Located {
            message,
            place: None,
            what: what.to_owned(),
        }
    }
}

impl std::fmt::Display for Located {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.place {
            Some((line, column)) => write!(
                f,
                "MT940 message {}, line {line}, column {column}: {}",
                self.message, self.what
            ),
            None => write!(f, "MT940 message {}: {}", self.message, self.what),
        }
    }
}

/// One field of a message: its tag, its text (continuation lines joined with `\n`), and the
/// line its tag opened.
struct Field<'a> {
    tag: &'a str,
    text: String,
    line: usize,
}

/// The tag (`20`, `61`, `60F` …) a line opens, and where its value starts.
fn tag_of(line: &str) -> Option<(&str, usize)> {
    let rest = line.strip_prefix(':')?;
    let end = rest.find(':')?;
    let tag = &rest[..end];
    let well_formed = (2..=3).contains(&tag.len())
        && tag.as_bytes()[..2].iter().all(u8::is_ascii_digit)
        && tag.as_bytes()[2..].iter().all(u8::is_ascii_uppercase);
    well_formed.then_some((tag, end + 2))
}

/// The file's messages, each a list of fields.
fn messages(text: &str) -> Vec<Vec<Field<'_>>> {
    let mut messages: Vec<Vec<Field>> = Vec::new();
    let mut open = false;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end_matches(['\r', ' ']);
        match tag_of(line) {
            Some(("20", start)) => {
                messages.push(vec![Field {
                    tag: "20",
                    text: line[start..].to_owned(),
                    line: n + 1,
                }]);
                open = true;
            }
            Some((tag, start)) if open => messages.last_mut().expect("open").push(Field {
                tag,
                text: line[start..].to_owned(),
                line: n + 1,
            }),
            // A trailer (`-`, `-}`, `-XXX`) closes the message; what follows is outside one.
            None if line.starts_with('-') && !line.starts_with("- ") => open = false,
            None if open && !line.is_empty() => {
                let field = messages.last_mut().and_then(|m| m.last_mut()).expect("open");
                field.text.push('\n');
                field.text.push_str(line);
            }
            _ => {}
        }
    }
    messages
}

fn yymmdd(text: &str) -> Option<Date> {
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<u8>().ok();
    let (year, month, day) = (number(0..2)?, number(2..4)?, number(4..6)?);
    // SWIFT years are two digits: 80–99 the last century, as the standard's users read them.
    let year = if year >= 80 { 1900 } else { 2000 } + i32::from(year);
    Date::from_calendar_date(year, Month::try_from(month).ok()?, day).ok()
}

/// A balance field (`C090924EUR54484,04`): its day, currency and signed amount.
fn balance(field: &Field, message: usize) -> Result<(Date, Currency, i64), Located> {
    // Columns count from the field's tag (`:60F:` is columns 1 to 5).
    let at = |offset: usize, what: String| {
        let column = field.tag.len() + 3 + offset;
        Located::at(message, field.line, column, format!(":{}: {what}", field.tag))
    };
    let text = field.text.as_str();
    if !text.starts_with(['C', 'D']) {
        return Err(at(0, "begins with C or D (credit or debit)".into()));
    }
    let day = yymmdd(&text[1..]).ok_or_else(|| at(1, "has no date (YYMMDD)".into()))?;
    let code = text.get(7..10).unwrap_or_default();
    let currency = Currency::parse(code).ok_or_else(|| at(7, format!("has no known currency: {code:?}")))?;
    let written = text.get(10..).unwrap_or_default().trim();
    let units = currency
        .units_of(&written.replacen(',', ".", 1))
        .ok_or_else(|| at(10, format!("amount {written:?} is not an amount of {currency}")))?;
    let sign = if text.starts_with('D') { -1 } else { 1 };
    Ok((day, currency, sign * units))
}

/// A `:61:` statement line.
fn line_of(field: &Field, currency: &Currency, message: usize) -> Result<StatementLine, Located> {
    // Columns count from the field's tag (`:61:` is columns 1 to 4).
    let at = |offset: usize, what: String| Located::at(message, field.line, offset + 5, format!(":61: {what}"));
    let first = field.text.lines().next().unwrap_or_default();
    let value_day = yymmdd(first).ok_or_else(|| at(0, "begins with the value date (YYMMDD)".into()))?;
    let mut rest = &first[6..];
    let mut offset = 6;
    let mut booked_on = value_day;
    if rest.len() >= 4 && rest.as_bytes()[..4].iter().all(u8::is_ascii_digit) {
        let month = rest[..2].parse::<u8>().ok().and_then(|m| Month::try_from(m).ok());
        let day = rest[2..4].parse::<u8>().unwrap_or(0);
        // The entry date's year is the value date's, or the one beside it across New Year.
        booked_on = [0, -1, 1]
            .into_iter()
            .filter_map(|shift| Date::from_calendar_date(value_day.year() + shift, month?, day).ok())
            .min_by_key(|d| (*d - value_day).whole_days().abs())
            .ok_or_else(|| at(offset, format!("entry date {:?} is not a date (MMDD)", &rest[..4])))?;
        rest = &rest[4..];
        offset += 4;
    }
    let (direction, reversal, mark) = if rest.starts_with("RC") {
        (EntryDirection::Credit, true, 2)
    } else if rest.starts_with("RD") {
        (EntryDirection::Debit, true, 2)
    } else if rest.starts_with('C') {
        (EntryDirection::Credit, false, 1)
    } else if rest.starts_with('D') {
        (EntryDirection::Debit, false, 1)
    } else {
        return Err(at(offset, "has no debit/credit mark (C, D, RC or RD)".into()));
    };
    rest = &rest[mark..];
    offset += mark;
    // The funds code, the third letter of a currency code, may come before the amount.
    if rest.starts_with(|c: char| c.is_ascii_uppercase()) {
        rest = &rest[1..];
        offset += 1;
    }
    let digits = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ','))
        .unwrap_or(rest.len());
    let written = &rest[..digits];
    let amount = currency
        .minor_units_of(&written.replacen(',', ".", 1))
        .ok_or_else(|| at(offset, format!("amount {written:?} is not an amount of {currency}")))?;
    rest = &rest[digits..];
    offset += digits;
    // Four bytes, and a character boundary after them: a bank's non-ASCII text is refused,
    // never cut in two.
    rest = match rest.get(4..) {
        Some(after) if rest.starts_with(['N', 'F', 'S']) => after,
        _ => {
            return Err(at(
                offset,
                "has no transaction type (N, F or S and three characters)".into(),
            ))
        }
    };
    let (owner, bank) = match rest.split_once("//") {
        Some((owner, bank)) => (owner, Some(bank.trim())),
        None => (rest, None),
    };
    let owner = owner.trim();
    Ok(StatementLine {
        rail_reference: bank.filter(|r| !r.is_empty()).map(str::to_owned),
        transaction_id: (owner != "NONREF").then(|| TransactionId::parse(owner)).flatten(),
        amount,
        currency: currency.clone(),
        status: if reversal {
            StatementStatus::Returned
        } else {
            StatementStatus::Confirmed
        },
        direction,
        reversal,
        batch: None,
        booked_on: Some(booked_on),
        end_to_end_id: None,
    })
}

/// The end-to-end id a line's information to the account owner (`:86:`) gives, as SEPA
/// banks write it: `EREF+<id>` (structured `?20`… subfields) or `/EREF/<id>/`.
fn end_to_end_id(information: &str) -> Option<TransactionId> {
    let text: String = information.lines().collect();
    let start = text
        .find("EREF+")
        .map(|at| at + 5)
        .or_else(|| text.find("/EREF/").map(|at| at + 6))?;
    let id = text[start..].split(['?', '/']).next()?;
    TransactionId::parse(id.trim())
}

/// Reads an MT940 file of one or more statements.
pub fn parse(bytes: &[u8]) -> Result<Statement, String> {
    let text = String::from_utf8_lossy(bytes);
    let messages = messages(&text);
    if messages.is_empty() {
        return Err("not an MT940 statement: no message begins with :20:".into());
    }
    let mut statement = Statement::default();
    let mut closed: Option<Date> = None;
    for (m, fields) in messages.iter().enumerate() {
        let message = m + 1;
        let opening = fields
            .iter()
            .find(|f| f.tag == "60F" || f.tag == "60M")
            .ok_or_else(|| Located::whole(message, "has no opening balance (:60F: or :60M:)").to_string())?;
        let (opened, currency, amount) = balance(opening, message).map_err(|e| e.to_string())?;
        if opening.tag == "60F" {
            statement.balances.push(StatementBalance {
                kind: BalanceKind::Opening,
                at_end_of: opened,
                currency: currency.clone(),
                amount,
            });
        }
        for (i, field) in fields.iter().enumerate().filter(|(_, f)| f.tag == "61") {
            let mut line = line_of(field, &currency, message).map_err(|e| e.to_string())?;
            let information = fields.get(i + 1).filter(|f| f.tag == "86");
            if line.transaction_id.is_none() {
                line.transaction_id = information.and_then(|f| end_to_end_id(&f.text));
            }
            statement.lines.push(line);
        }
        if let Some(closing) = fields.iter().find(|f| f.tag == "62F" || f.tag == "62M") {
            let (day, currency, amount) = balance(closing, message).map_err(|e| e.to_string())?;
            closed = closed.max(Some(day));
            if closing.tag == "62F" {
                statement.balances.push(StatementBalance {
                    kind: BalanceKind::Closing,
                    at_end_of: day,
                    currency,
                    amount,
                });
            }
        }
    }
    // A statement without lines covers its closing day; one with lines, the days they were
    // booked (its opening balance's day belongs to the statement before).
    if statement.lines.is_empty() {
        statement.period = closed.map(|day| Period { from: day, to: day });
    }
    Ok(statement)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    fn read(text: &str) -> Result<Statement, String> {
        parse(text.as_bytes())
    }

    #[test]
    fn each_mark_direction_and_reference_becomes_a_line() {
        let statement = read(
            "header the bank adds\n:20:STMT\n:25:NL00BANK0123456789\n:28C:1/1\n:60F:C261123EUR100,00\n\
             :61:2611241124DR12,50NTRFtxn_01abc//B-1\nSALARY\n:86:/EREF/txn_01abc\n\
             :61:261124C3,NMSCNONREF\n:61:261124RD7,25NRTINONREF//B-3\n:62F:C261124EUR83,25\n-\n",
        )
        .unwrap();
        let seen: Vec<_> = statement
            .lines
            .iter()
            .map(|l| {
                (
                    l.amount.minor_units(),
                    l.direction,
                    l.reversal,
                    l.status,
                    l.rail_reference.clone(),
                    l.transaction_id.as_ref().map(ToString::to_string),
                    l.booked_on,
                )
            })
            .collect();
        use EntryDirection::*;
        let day = Some(date!(2026 - 11 - 24));
        assert_eq!(
            seen,
            vec![
                (
                    1250,
                    Debit,
                    false,
                    StatementStatus::Confirmed,
                    Some("B-1".into()),
                    Some("txn_01abc".into()),
                    day
                ),
                (300, Credit, false, StatementStatus::Confirmed, None, None, day),
                (
                    725,
                    Debit,
                    true,
                    StatementStatus::Returned,
                    Some("B-3".into()),
                    None,
                    day
                ),
            ]
        );
        assert_eq!(statement.period, None, "the lines' days are the period");
        let balances: Vec<_> = statement
            .balances
            .iter()
            .map(|b| (b.kind, b.at_end_of, b.currency.code(), b.amount))
            .collect();
        assert_eq!(
            balances,
            [
                (BalanceKind::Opening, date!(2026 - 11 - 23), "EUR", 10_000),
                (BalanceKind::Closing, date!(2026 - 11 - 24), "EUR", 8_325)
            ]
        );
    }

    #[test]
    fn the_end_to_end_id_is_read_from_the_information_to_the_account_owner() {
        let id = "txn_01jd0000000000000000000000";
        let statement = read(&format!(
            ":20:S\n:60F:C261123EUR0,00\n:61:261124D1,00NTRFNONREF\n:86:166?00SEPA?20EREF+{id}\n?21SVWZ+salary\n\
             :61:261124D2,00NTRFNONREF\n:86:/TRCD/00100/EREF/{id}/REMI/salary\n:61:261124D3,00NTRFNONREF\n:86:EREF+NOTPROVIDED\n"
        ))
        .unwrap();
        let ids: Vec<_> = statement
            .lines
            .iter()
            .map(|l| l.transaction_id.as_ref().map(ToString::to_string))
            .collect();
        assert_eq!(ids, [Some(id.to_owned()), Some(id.to_owned()), None]);
    }

    #[test]
    fn an_entry_date_across_new_year_is_in_the_year_beside_the_value_date() {
        let statement =
            read(":20:S\n:60F:C261231EUR0,00\n:61:2701021231D1,00NTRFNONREF\n:62F:C270102EUR1,00\n").unwrap();
        assert_eq!(statement.lines[0].booked_on, Some(date!(2026 - 12 - 31)));
    }

    #[test]
    fn a_refusal_names_the_message_line_and_column() {
        let bad_amount = read(
            ":20:A\n:60F:C261123EUR0,00\n:62F:C261123EUR0,00\n:20:B\n:60F:C261123EUR0,00\n:61:261124D1x,00NTRFNONREF\n",
        );
        assert_eq!(
            bad_amount.unwrap_err(),
            "MT940 message 2, line 6, column 13: :61: has no transaction type (N, F or S and three characters)"
        );
        let no_mark = read(":20:A\n:60F:C261123EUR0,00\n:61:261124X1,00NTRFNONREF\n").unwrap_err();
        assert_eq!(
            no_mark,
            "MT940 message 1, line 3, column 11: :61: has no debit/credit mark (C, D, RC or RD)"
        );
        let no_currency = read(":20:A\n:60F:C261123XXY0,00\n").unwrap_err();
        assert_eq!(
            no_currency,
            "MT940 message 1, line 2, column 13: :60F: has no known currency: \"XXY\""
        );
        let no_opening = read(":20:A\n:61:261124D1,00NTRFNONREF\n").unwrap_err();
        assert_eq!(no_opening, "MT940 message 1: has no opening balance (:60F: or :60M:)");
        assert!(read("just text").unwrap_err().contains("no message begins with :20:"));
        // A character of more than one byte across the type's fourth byte.
        let cut = read(":20:A\n:60F:C261123EUR0,00\n:61:261124D1,00NTTéREF\n").unwrap_err();
        assert_eq!(
            cut,
            "MT940 message 1, line 3, column 16: :61: has no transaction type (N, F or S and three characters)"
        );
    }
}
