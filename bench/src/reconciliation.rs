//! Matching a statement against the transactions it speaks of.

use crate::local_server;
use crate::measure::ms;
use ops_tests::ADMIN_KEY;
use std::time::{Duration, Instant};

/// Reconciliation (local mode): a 10,000-line statement matched against the 10,000
/// transactions it speaks of, in the domain alone and as an import over HTTP (read by the
/// sandbox adapter, candidates read from the store's confirmation index, lines kept), with
/// a hundred breaks (each an exceptions item) in the second run. The transactions are written
/// to the store directly, as confirmed payouts would have left them.
pub(crate) async fn reconciliation() {
    use ops_domain::money::Amount;
    use ops_domain::ports::{Changeset, Commit, Write};
    use ops_domain::rail::Period;
    use ops_domain::reconciliations::{match_statement, ManyToOne, MatchingRules};
    println!();
    println!("| reconciliation | lines | breaks | bytes | time ms | lines/s |");
    println!("|---|---|---|---|---|---|");
    let row = |what: &str, lines: usize, breaks: u64, bytes: usize, took: Duration| {
        println!(
            "| {what} | {lines} | {breaks} | {bytes} | {} | {:.0} |",
            ms(took),
            lines as f64 / took.as_secs_f64()
        );
    };
    let (server, api, _data) = local_server(true).await;
    // The two runs' payments were confirmed ten days apart, so neither is missing from the
    // other's statement.
    let now = time::OffsetDateTime::now_utc();
    let confirmed = |run: &str| now - time::Duration::days(if run == "a" { 0 } else { 10 });
    let count = 10_000;
    let statement_of = |run: &str, breaks: usize| {
        let day = confirmed(run).date();
        let mut csv = format!("{}\n", ops_infra::rails::STATEMENT_HEADER);
        for i in 0..count {
            // The last `breaks` lines carry another amount: mismatched.
            let amount = 1_000 + i as i64 + i64::from(i >= count - breaks);
            csv += &format!("ref-{run}-{i},,{amount},CLP,confirmed,{day},debit\n");
        }
        csv.into_bytes()
    };
    let mut transactions = vec![];
    for run in ["a", "b"] {
        let made: Vec<_> = (0..count)
            .map(|i| {
                let mut t = ops_infra::conformance::reconciliations::transaction(
                    &format!("txn_{run}{i:025}"),
                    "psp-local:sandbox",
                    Some(confirmed(run)),
                );
                t.rail_reference = Some(format!("ref-{run}-{i}"));
                t.amount = Amount::new(1_000 + i as i64).unwrap();
                t
            })
            .collect();
        for batch in made.chunks(1_000) {
            let writes = batch.iter().cloned().map(Write::InsertTransaction).collect();
            server
                .embedded
                .store
                .commit(Changeset { writes })
                .await
                .expect("stored");
        }
        transactions.push(made);
    }

    let statement = statement_of("a", 0);
    let t = Instant::now();
    ops_infra::rails::parse_csv(&statement).expect("a statement");
    row(
        "read only (the yardstick: a plain parse)",
        count,
        0,
        statement.len(),
        t.elapsed(),
    );
    let today = now.date();
    let period = Period { from: today, to: today };
    let t = Instant::now();
    let parsed = ops_infra::rails::parse_csv(&statement).expect("a statement");
    let lines = match_statement(&parsed.lines, &transactions[0], period, &MatchingRules::default());
    assert_eq!(lines.len(), count);
    row(
        "read and matched (domain, default rules)",
        count,
        0,
        statement.len(),
        t.elapsed(),
    );

    // The same day with rules on: the last 1,000 payouts booked as 500 netted lines of two
    // each, and 100 lines that nothing adds up to.
    let rules = MatchingRules {
        date_window_days: 5,
        many_to_one: Some(ManyToOne { max_transactions: 3 }),
        ..MatchingRules::default()
    };
    let day = confirmed("a").date();
    let mut csv = format!("{}\n", ops_infra::rails::STATEMENT_HEADER);
    let singles = count - 1_000;
    for i in 0..singles {
        csv += &format!("ref-a-{i},,{},CLP,confirmed,{day},debit\n", 1_000 + i);
    }
    // Before the netted lines, while all 1,000 are unclaimed: 20,000 is less than any two of
    // them (at least 10,000 + 10,001) and more than any one, so each search is spent in vain.
    for _ in 0..100 {
        csv += &format!(",,20000,CLP,confirmed,{day},debit\n");
    }
    for pair in (singles..count).step_by(2) {
        csv += &format!(",,{},CLP,confirmed,{day},debit\n", 2_000 + 2 * pair + 1);
    }
    let netted = csv.into_bytes();
    let t = Instant::now();
    let parsed = ops_infra::rails::parse_csv(&netted).expect("a statement");
    let lines = match_statement(&parsed.lines, &transactions[0], period, &rules);
    let took = t.elapsed();
    let grouped = lines.iter().filter(|l| !l.group.is_empty()).count();
    assert_eq!(grouped, 500, "every netted line found its pair");
    let breaks = lines.iter().filter(|l| l.outcome.is_break()).count();
    row(
        "read and matched (domain, groups of up to 3: 500 netted lines, 100 that add up to nothing)",
        parsed.lines.len(),
        breaks as u64,
        netted.len(),
        took,
    );

    for (run, breaks) in [("a", 0), ("b", 100)] {
        let statement = statement_of(run, breaks);
        let t = Instant::now();
        let imported = api
            .send(
                reqwest::Method::POST,
                "/v1/reconciliations",
                Some(ADMIN_KEY),
                Some(&format!("bench-statement-{run}")),
                Some(&ops_tests::statement_body("csv", &statement)),
            )
            .await;
        let took = t.elapsed();
        assert_eq!(imported.status, 201, "{}", imported.json());
        let outcomes = &imported.json()["outcomes"];
        assert_eq!(outcomes["matched"], (count - breaks) as u64, "{outcomes}");
        let found = outcomes["mismatched"].as_u64().unwrap() + outcomes["missing"].as_u64().unwrap();
        row("imported over HTTP (201)", count, found, statement.len(), took);
    }
}
