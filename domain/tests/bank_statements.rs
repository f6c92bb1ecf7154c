//! Real statement files banks and well-known parsers publish (their origins and licences in
//! `statements/SOURCES.md`), read as a rail's adapter reads them.

use ops_domain::rail::{BalanceKind, EntryDirection, StatementFormat, StatementStatus};
use ops_domain::reconciliations::read_bank_statement;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn files(folder: &str, extension: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/statements")
        .join(folder);
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    found.sort();
    found
}

/// A decimal amount (`"54484.04"`) in minor units of a currency with `digits` of them.
fn minor_units(decimal: &str, digits: u32) -> i64 {
    let (whole, fraction) = decimal.split_once('.').unwrap_or((decimal, ""));
    let fraction = format!("{fraction:0<width$}", width = digits as usize);
    format!("{whole}{fraction}").parse().unwrap()
}

/// Every MT940 file gives the lines an independent strict parser (the `mt940` crate, whose
/// reading of each file is kept beside it as JSON) gives: amount, direction, reversal, day
/// and the bank's reference, in order.
#[test]
fn each_published_mt940_file_reads_as_an_independent_parser_reads_it() {
    let mut lines_read = 0;
    for path in files("mt940", "sta") {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let statement = read_bank_statement(StatementFormat::Mt940, &std::fs::read(&path).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected: Value = serde_json::from_slice(&std::fs::read(path.with_extension("json")).unwrap()).unwrap();
        let mut wanted = Vec::new();
        let mut balances = Vec::new();
        for message in expected.as_array().unwrap() {
            let currency = message["opening_balance"]["iso_currency_code"].as_str().unwrap();
            let digits = ops_domain::money::Currency::parse(currency).unwrap().minor_digits();
            for (kind, balance) in [
                (BalanceKind::Opening, &message["opening_balance"]),
                (BalanceKind::Closing, &message["closing_balance"]),
            ] {
                if balance["is_intermediate"] == false {
                    let sign = if balance["debit_credit_indicator"] == "Debit" {
                        -1
                    } else {
                        1
                    };
                    let amount = sign * minor_units(balance["amount"].as_str().unwrap(), digits);
                    balances.push((kind, balance["date"].as_str().unwrap().to_owned(), amount));
                }
            }
            for line in message["statement_lines"].as_array().unwrap() {
                let (direction, reversal) = match line["ext_debit_credit_indicator"].as_str().unwrap() {
                    "Credit" => (EntryDirection::Credit, false),
                    "Debit" => (EntryDirection::Debit, false),
                    // The crate names a reversal by its own entry (`RC`, a debit reversing a
                    // credit, is its `ReverseDebit`); a line here carries the booking it reverses.
                    "ReverseDebit" => (EntryDirection::Credit, true),
                    _ => (EntryDirection::Debit, true),
                };
                let day = line["entry_date"]
                    .as_str()
                    .or(line["value_date"].as_str())
                    .unwrap()
                    .to_owned();
                let bank = line["bank_ref"]
                    .as_str()
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(str::to_owned);
                wanted.push((
                    minor_units(line["amount"].as_str().unwrap(), digits),
                    direction,
                    reversal,
                    day,
                    bank,
                ));
            }
        }
        let read: Vec<_> = statement
            .lines
            .iter()
            .map(|l| {
                assert_eq!(l.status == StatementStatus::Returned, l.reversal, "{name}");
                (
                    l.amount.minor_units(),
                    l.direction,
                    l.reversal,
                    l.booked_on.unwrap().to_string(),
                    l.rail_reference.clone(),
                )
            })
            .collect();
        assert_eq!(read, wanted, "{name}");
        let read_balances: Vec<_> = statement
            .balances
            .iter()
            .map(|b| (b.kind, b.at_end_of.to_string(), b.amount))
            .collect();
        assert_eq!(read_balances, balances, "{name}");
        lines_read += read.len();
    }
    assert!(lines_read > 100, "read {lines_read} lines");
}

/// The BAI2 files a published parser ships with: every detail a line, in its account's
/// currency, on its group's day.
#[test]
fn each_published_bai2_file_reads_line_by_line() {
    let read = |name: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/statements/bai2")
            .join(name);
        read_bank_statement(StatementFormat::Bai2, &std::fs::read(path).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let test = read("test.bai");
    let line = &test.lines[0];
    assert_eq!(test.lines.len(), 1);
    assert_eq!(
        (
            line.amount.minor_units(),
            line.currency.code(),
            line.direction,
            line.rail_reference.as_deref()
        ),
        (1000, "USD", EntryDirection::Debit, Some("I1220012"))
    );
    assert_eq!(line.booked_on.unwrap().to_string(), "2020-03-31");
    let canadian = read("test2.bai");
    assert_eq!(canadian.lines.len(), 1);
    assert_eq!(
        (
            canadian.lines[0].amount.minor_units(),
            canadian.lines[0].currency.code(),
            canadian.lines[0].direction
        ),
        (187_938, "CAD", EntryDirection::Credit)
    );
    assert_eq!(canadian.lines[0].booked_on.unwrap().to_string(), "2006-03-17");
    // An account's summaries without details: no line, and the group's day as its period.
    let summaries = read("test3.bai");
    assert!(summaries.lines.is_empty());
    assert_eq!(
        summaries.period.map(|p| p.to.to_string()).as_deref(),
        Some("2006-03-17")
    );
    assert_eq!(files("bai2", "bai").len(), 3);
}

/// A bank's camt.052 intraday report as python-fints keeps it to test its own reader
/// (Triodos Bank Deutschland, names and accounts replaced): the lines and balances that
/// reader finds, read here too.
#[test]
fn a_published_camt052_report_reads_as_its_parser_reads_it() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/statements/camt/python-fints-triodos.camt052.xml");
    let statement = read_bank_statement(StatementFormat::Camt052, &std::fs::read(path).unwrap()).unwrap();
    let lines: Vec<_> = statement
        .lines
        .iter()
        .map(|l| {
            (
                l.amount.minor_units(),
                l.currency.code().to_owned(),
                l.direction,
                l.booked_on.unwrap().to_string(),
                l.rail_reference.clone(),
                l.transaction_id.is_some(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            (
                3_500,
                "EUR".into(),
                EntryDirection::Credit,
                "2025-10-28".into(),
                Some("2025102812344060000".into()),
                false
            ),
            (
                2_963,
                "EUR".into(),
                EntryDirection::Debit,
                "2025-11-07".into(),
                Some("2025110701433815000".into()),
                false
            ),
        ]
    );
    let balances: Vec<_> = statement
        .balances
        .iter()
        .map(|b| (b.kind, b.amount, b.currency.code().to_owned()))
        .collect();
    assert_eq!(
        balances,
        [
            (BalanceKind::Opening, 123_456, "EUR".into()),
            (BalanceKind::Closing, 456_789, "EUR".into())
        ]
    );
}

/// The camt.053 statements genkgo/camt's own end-to-end test reads (versions .001.02, .04 and
/// .08): the one entry and the booked balances it finds there, read here too (it also lists
/// available balances, which reconciliation does not use).
#[test]
fn published_camt053_statements_read_as_their_parser_reads_them() {
    for name in ["camt053.v2.minimal", "camt053.v4", "camt053.v8"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/statements/camt/genkgo-{name}.xml"));
        let statement = read_bank_statement(StatementFormat::Camt053, &std::fs::read(path).unwrap())
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        let lines: Vec<_> = statement
            .lines
            .iter()
            .map(|l| {
                (
                    l.amount.minor_units(),
                    l.currency.code().to_owned(),
                    l.direction,
                    l.status,
                    l.booked_on.unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            lines,
            [(
                885,
                "EUR".into(),
                EntryDirection::Credit,
                StatementStatus::Confirmed,
                "2014-12-31".into()
            )],
            "{name}"
        );
        let balances: Vec<_> = statement
            .balances
            .iter()
            .map(|b| (b.kind, b.amount, b.currency.code().to_owned()))
            .collect();
        assert_eq!(
            balances,
            [
                (BalanceKind::Opening, 1_815, "EUR".into()),
                (BalanceKind::Closing, -2_700, "SEK".into())
            ],
            "{name}"
        );
    }
}

/// The camt.054 notifications genkgo/camt's end-to-end test reads (versions .001.02, .04 and
/// .08): one debit of 200,000 SEK booked on 18 October 2007 with three transaction details.
/// Where the details carry their own amounts (.04 and .08) each is a line of the batch; where
/// they do not (.02) the entry is the line.
#[test]
fn published_camt054_notifications_read_as_their_parser_reads_them() {
    for name in ["camt054.v2", "camt054.v4", "camt054.v8"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/statements/camt/genkgo-{name}.xml"));
        let statement = read_bank_statement(StatementFormat::Camt054, &std::fs::read(path).unwrap())
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        assert!(
            statement
                .lines
                .iter()
                .all(|l| l.booked_on.map(|d| d.to_string()).as_deref() == Some("2007-10-18")),
            "{name}"
        );
        match statement.lines.as_slice() {
            [entry] => {
                assert_eq!(name, "camt054.v2");
                assert_eq!(
                    (entry.amount.minor_units(), entry.currency.code(), entry.direction),
                    (20_000_000, "SEK", EntryDirection::Debit)
                );
                assert!(entry.batch.is_none());
            }
            details => {
                assert_eq!(details.len(), 3, "{name}");
                for detail in details {
                    let batch = detail.batch.as_ref().expect("a detail of the entry");
                    assert_eq!(
                        (batch.entry, batch.details, batch.entry_amount.minor_units()),
                        (1, 3, 20_000_000),
                        "{name}"
                    );
                }
                let amounts: Vec<i64> = details.iter().map(|d| d.amount.minor_units()).collect();
                assert_eq!(amounts, [310, 320, 320], "{name}");
            }
        }
    }
}
