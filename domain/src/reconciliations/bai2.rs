//! BAI2 cash-management files, as US banks send them: `02` groups (their as-of date is the
//! booking day), `03` accounts (their currency, else the group's, else USD), `16` transaction
//! details (a type code of 100–399 is a credit, 400–699 a debit; the bank's reference, the
//! customer's reference our end-to-end id), `88` continuing the record before it. A refusal
//! names the line and column of the field.

use crate::ids::TransactionId;
use crate::money::Currency;
use crate::rail::{BalanceKind, EntryDirection, Period, Statement, StatementBalance, StatementLine, StatementStatus};
use time::{Date, Month};

/// One field of a logical record, with the line and column it starts at.
struct Field<'a> {
    text: &'a str,
    line: usize,
    column: usize,
}

/// A record (its physical line and the `88` continuations after it) split into fields; the
/// text of a `16` record keeps its commas, as the format allows.
fn records(text: &str) -> Vec<Vec<Field<'_>>> {
    let mut records: Vec<Vec<Field>> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        if line.is_empty() {
            continue;
        }
        // A record ends at its `/`; what follows it on the line (spaces, padding) is not data.
        let body = line.strip_suffix('/').unwrap_or(line);
        let mut fields: Vec<Field> = Vec::new();
        let mut column = 1;
        for text in body.split(',') {
            fields.push(Field {
                text,
                line: n + 1,
                column,
            });
            column += text.chars().count() + 1;
        }
        if fields[0].text == "88" {
            if let Some(previous) = records.last_mut() {
                previous.extend(fields.into_iter().skip(1));
                continue;
            }
        }
        records.push(fields);
    }
    records
}

fn refused(field: &Field, what: String) -> String {
    format!("BAI2 file, line {}, column {}: {what}", field.line, field.column)
}

fn yymmdd(field: &Field) -> Result<Date, String> {
    let text = field.text.trim();
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<u8>().ok();
    let parsed = (|| {
        let (year, month, day) = (number(0..2)?, number(2..4)?, number(4..6)?);
        Date::from_calendar_date(2000 + i32::from(year), Month::try_from(month).ok()?, day).ok()
    })();
    parsed
        .filter(|_| text.len() == 6)
        .ok_or_else(|| refused(field, format!("the as-of date {text:?} is not a date (YYMMDD)")))
}

/// How many fields a funds type adds after itself (`V`: value date and time, `S`: three
/// availability amounts, `D`: a count and that many day and amount pairs).
fn funds_fields(fields: &[Field], at: usize) -> Result<usize, String> {
    let funds = fields.get(at).map_or("", |f| f.text.trim());
    Ok(match funds {
        "V" => 2,
        "S" => 3,
        "D" => {
            let count = fields.get(at + 1);
            let pairs = count.and_then(|f| f.text.trim().parse::<usize>().ok()).ok_or_else(|| {
                let field = count.unwrap_or(&fields[at]);
                refused(
                    field,
                    "a distributed funds type (D) is followed by its number of distributions".into(),
                )
            })?;
            1 + 2 * pairs
        }
        _ => 0,
    })
}

/// The opening (`010`) and closing (`015`) ledger balances among an account record's
/// summaries (type code, amount, item count, funds type and what the funds type adds).
fn ledger_balances(
    record: &[Field],
    currency: &Currency,
    as_of: Date,
    balances: &mut Vec<StatementBalance>,
) -> Result<(), String> {
    let mut at = 3;
    while at + 1 < record.len() {
        let code = record[at].text.trim();
        let kind = match code {
            "010" => Some((BalanceKind::Opening, as_of.previous_day().unwrap_or(as_of))),
            "015" => Some((BalanceKind::Closing, as_of)),
            _ => None,
        };
        let written = record[at + 1].text.trim();
        if let Some((kind, at_end_of)) = kind.filter(|_| !written.is_empty()) {
            let (sign, digits) = match written.strip_prefix('-') {
                Some(digits) => (-1, digits),
                None => (1, written.strip_prefix('+').unwrap_or(written)),
            };
            let amount = digits
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| digits.parse::<i64>().ok())
                .flatten()
                .ok_or_else(|| {
                    refused(
                        &record[at + 1],
                        format!("the balance {written:?} is not a whole number of {currency}'s minor units"),
                    )
                })?;
            balances.push(StatementBalance {
                kind,
                at_end_of,
                currency: currency.clone(),
                amount: sign * amount,
            });
        }
        at += 4 + funds_fields(record, at + 3)?;
    }
    Ok(())
}

/// A `16` record as a statement line.
fn detail(fields: &[Field], currency: &Currency, day: Date) -> Result<StatementLine, String> {
    let field = |i: usize, name: &str| {
        fields.get(i).ok_or_else(|| {
            refused(
                fields.last().expect("a record"),
                format!("the transaction detail has no {name}"),
            )
        })
    };
    let code_field = field(1, "type code")?;
    let code: u16 = code_field.text.trim().parse().map_err(|_| {
        refused(
            code_field,
            format!("the type code {:?} is not a number", code_field.text),
        )
    })?;
    let direction = match code {
        100..=399 => EntryDirection::Credit,
        400..=699 => EntryDirection::Debit,
        _ => {
            return Err(refused(
                code_field,
                format!("type code {code} is neither a credit (100–399) nor a debit (400–699)"),
            ))
        }
    };
    let amount_field = field(2, "amount")?;
    let digits = amount_field.text.trim();
    let amount = digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse::<i64>().ok())
        .flatten()
        .and_then(crate::money::Amount::new)
        .ok_or_else(|| {
            refused(
                amount_field,
                format!("the amount {digits:?} is not a positive whole number of {currency}'s minor units"),
            )
        })?;
    let references = 4 + funds_fields(fields, 3)?;
    let text = |i: usize| fields.get(i).map(|f| f.text.trim()).filter(|t| !t.is_empty());
    Ok(StatementLine {
        rail_reference: text(references).map(str::to_owned),
        transaction_id: text(references + 1).and_then(TransactionId::parse),
        amount,
        currency: currency.clone(),
        status: StatementStatus::Confirmed,
        direction,
        reversal: false,
        batch: None,
        booked_on: Some(day),
        end_to_end_id: None,
    })
}

/// Reads a BAI2 file of one or more groups and accounts.
pub fn parse(bytes: &[u8]) -> Result<Statement, String> {
    let text = String::from_utf8_lossy(bytes);
    let records = records(&text);
    if records.first().is_none_or(|r| r[0].text != "01") {
        return Err("not a BAI2 file: it begins with a 01 file header record".into());
    }
    let mut statement = Statement::default();
    let (mut day, mut group_currency, mut currency) = (None, None, None);
    let mut days: Vec<Date> = Vec::new();
    for record in &records {
        let code = &record[0];
        let currency_at = |i: usize| -> Result<Option<Currency>, String> {
            match record.get(i).map(|f| f.text.trim()).filter(|t| !t.is_empty()) {
                None => Ok(None),
                Some(text) => Currency::parse(text)
                    .map(Some)
                    .ok_or_else(|| refused(&record[i], format!("{text:?} is not a known currency"))),
            }
        };
        match code.text {
            "01" | "49" | "98" | "99" => {}
            "02" => {
                let as_of = record
                    .get(4)
                    .ok_or_else(|| refused(code, "the group header has no as-of date".into()))?;
                let as_of = yymmdd(as_of)?;
                day = Some(as_of);
                days.push(as_of);
                group_currency = currency_at(6)?;
            }
            "03" => {
                currency = currency_at(2)?.or_else(|| group_currency.clone());
                let account_currency = currency
                    .clone()
                    .unwrap_or_else(|| Currency::parse("USD").expect("a currency"));
                let as_of = day.ok_or_else(|| refused(code, "an account (03) outside a group (02)".into()))?;
                ledger_balances(record, &account_currency, as_of, &mut statement.balances)?;
            }
            "16" => {
                let day = day.ok_or_else(|| refused(code, "a transaction detail outside a group (02)".into()))?;
                let currency = currency
                    .clone()
                    .or_else(|| group_currency.clone())
                    .unwrap_or_else(|| Currency::parse("USD").expect("a currency"));
                statement.lines.push(detail(record, &currency, day)?);
            }
            other => return Err(refused(code, format!("{other:?} is not a BAI2 record code"))),
        }
    }
    if statement.lines.is_empty() {
        statement.period = days
            .iter()
            .min()
            .zip(days.iter().max())
            .map(|(&from, &to)| Period { from, to });
    }
    Ok(statement)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    #[test]
    fn details_become_lines_in_their_accounts_currency_on_the_groups_day() {
        let file = "01,BANK,PSP,261124,2300,1,,,2/\n02,PSP,BANK,1,261124,2300,USD,/\n\
                    03,111,JPY,010,500,,,015,-2250,2,V,261124,2300,/\n16,495,1500,V,261124,0900,B-1,txn_01abc,wire out, to a payee/\n\
                    88,more text/\n16,175,250,,B-2,,deposit/\n49,2250,4/\n03,222,,010,0,,/\n\
                    16,451,1999,D,2,0,1000,1,999,B-3,NOTPROVIDED,ACH debit/\n49,1999,2/\n98,0,2,8/\n99,0,1,10/\n";
        let statement = parse(file.as_bytes()).unwrap();
        let seen: Vec<_> = statement
            .lines
            .iter()
            .map(|l| {
                (
                    l.amount.minor_units(),
                    l.currency.code().to_owned(),
                    l.direction,
                    l.rail_reference.clone(),
                    l.transaction_id.as_ref().map(ToString::to_string),
                )
            })
            .collect();
        use EntryDirection::*;
        assert_eq!(
            seen,
            vec![
                (1500, "JPY".into(), Debit, Some("B-1".into()), Some("txn_01abc".into())),
                (250, "JPY".into(), Credit, Some("B-2".into()), None),
                (1999, "USD".into(), Debit, Some("B-3".into()), None),
            ]
        );
        assert!(statement
            .lines
            .iter()
            .all(|l| l.booked_on == Some(date!(2026 - 11 - 24))));
        let balances: Vec<_> = statement
            .balances
            .iter()
            .map(|b| (b.kind, b.at_end_of, b.currency.code(), b.amount))
            .collect();
        assert_eq!(
            balances,
            [
                (BalanceKind::Opening, date!(2026 - 11 - 23), "JPY", 500),
                (BalanceKind::Closing, date!(2026 - 11 - 24), "JPY", -2250),
                (BalanceKind::Opening, date!(2026 - 11 - 23), "USD", 0)
            ]
        );
    }

    #[test]
    fn a_refusal_names_the_line_and_column() {
        let file = |detail: &str| format!("01,B,P,261124,2300,1,,,2/\n02,P,B,1,261124,,USD,/\n03,1,,/\n{detail}\n");
        let refusal = |detail: &str| parse(file(detail).as_bytes()).unwrap_err();
        assert_eq!(
            refusal("16,495,12.50,,B-1,,x/"),
            "BAI2 file, line 4, column 8: the amount \"12.50\" is not a positive whole number of USD's minor units"
        );
        assert_eq!(
            refusal("16,899,100,,B-1,,x/"),
            "BAI2 file, line 4, column 4: type code 899 is neither a credit (100–399) nor a debit (400–699)"
        );
        assert_eq!(
            refusal("16,495,100,D,x/"),
            "BAI2 file, line 4, column 14: a distributed funds type (D) is followed by its number of distributions"
        );
        assert_eq!(
            refusal("17,1/"),
            "BAI2 file, line 4, column 1: \"17\" is not a BAI2 record code"
        );
        let bad_day = parse(b"01,B,P,261124,2300,1,,,2/\n02,P,B,1,261340,,USD,/\n").unwrap_err();
        assert_eq!(
            bad_day,
            "BAI2 file, line 2, column 10: the as-of date \"261340\" is not a date (YYMMDD)"
        );
        assert!(parse(b"16,495,1/")
            .unwrap_err()
            .contains("begins with a 01 file header"));
    }
}
