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
    let parsed = ops_infra::rails::parse_csv(&statement).expect("a statement");
    let today = now.date();
    let period = Period { from: today, to: today };
    let lines = ops_domain::reconciliations::match_statement(&parsed.lines, &transactions[0], period);
    assert_eq!(lines.len(), count);
    row("read and matched (domain)", count, 0, statement.len(), t.elapsed());

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
