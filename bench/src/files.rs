//! Payroll files and a report of many rows.

use crate::local_server;
use crate::measure::{ms, peak_rss_kib};
use ops_tests::Api;
use std::time::{Duration, Instant};

/// Payroll files (local mode): validating a 50,000-line file, in the domain alone and as an
/// upload answered over HTTP, and a 10,000-line file's operations made end to end by the
/// worker (a two-step workflow, so the figure is the split, not the payouts).
pub(crate) async fn files() {
    println!();
    println!("| payroll file | lines | bytes | time ms | lines/s |");
    println!("|---|---|---|---|---|");
    let row = |what: &str, lines: usize, bytes: usize, took: Duration| {
        println!(
            "| {what} | {lines} | {bytes} | {} | {:.0} |",
            ms(took),
            lines as f64 / took.as_secs_f64()
        );
    };
    let lines =
        |count: usize| ops_tests::payroll_csv(&(0..count).map(|i| (1_000 + i as i64, "CLP")).collect::<Vec<_>>());
    let big = lines(50_000);
    let t = Instant::now();
    let parsed = ops_domain::files::csv_lines::parse(&big, &|rail| rail == "psp-local:sandbox").expect("valid");
    row("validate (domain)", parsed.len(), big.len(), t.elapsed());

    let (server, api, _data) = local_server(true).await;
    let customer = api.create_customer().await;
    let t = Instant::now();
    let uploaded = api
        .upload(
            "/v1/files?workflow=two_step",
            &customer.key,
            "bench-50k",
            "text/csv",
            big.clone(),
        )
        .await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    row("upload answered 202 (HTTP)", 50_000, big.len(), t.elapsed());

    let customer = api.create_customer().await;
    let ten = lines(10_000);
    let t = Instant::now();
    let uploaded = api
        .upload(
            "/v1/files?workflow=two_step",
            &customer.key,
            "bench-10k",
            "text/csv",
            ten.clone(),
        )
        .await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    loop {
        let file = api
            .get(&format!("/v1/files/{}", uploaded.id()), &customer.key)
            .await
            .json();
        if file["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    row(
        "10 operations made (upload to completed)",
        10_000,
        ten.len(),
        t.elapsed(),
    );
    pain001_files(&api).await;
    report_of_many(&server, &api).await;
}

/// A 10,000-transaction pain.001 (ten payment informations of 1,000): a plain parse of it
/// (quick-xml's events, every element read and nothing checked, the yardstick), the service's
/// reading and checking of it, and the upload split into its ten operations.
async fn pain001_files(api: &Api) {
    let amounts: Vec<String> = (0..1_000).map(|i| (1_000 + i).to_string()).collect();
    let ids: Vec<Vec<String>> = (0..10)
        .map(|p| (0..1_000).map(|i| format!("E2E-{p}-{i}")).collect())
        .collect();
    let transactions: Vec<Vec<(&str, &str, &str)>> = ids
        .iter()
        .map(|of_block| {
            of_block
                .iter()
                .zip(&amounts)
                .map(|(id, amount)| (id.as_str(), amount.as_str(), "CLP"))
                .collect()
        })
        .collect();
    let names: Vec<String> = (0..10).map(|p| format!("BLOCK-{p}")).collect();
    let blocks: Vec<ops_tests::PaymentInformation> = names
        .iter()
        .zip(&transactions)
        .map(|(name, t)| (name.as_str(), t.as_slice()))
        .collect();
    let xml = ops_tests::pain001("BENCH-10K", &blocks);
    let row = |what: &str, took: Duration| {
        println!(
            "| pain.001: {what} | 10000 | {} | {} | {:.0} |",
            xml.len(),
            ms(took),
            10_000.0 / took.as_secs_f64()
        );
    };
    let t = Instant::now();
    let mut reader = quick_xml::Reader::from_reader(xml.as_slice());
    let mut buffer = vec![];
    let mut transactions_seen = 0;
    loop {
        match reader.read_event_into(&mut buffer).expect("well formed") {
            quick_xml::events::Event::Start(e) if e.local_name().into_inner() == "CdtTrfTxInf" => {
                transactions_seen += 1
            }
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
        buffer.clear();
    }
    assert_eq!(transactions_seen, 10_000);
    row("plain parse (quick-xml events, yardstick)", t.elapsed());
    let t = Instant::now();
    let read = ops_domain::files::pain001::parse(&xml, "psp-local:sandbox").expect("valid");
    assert_eq!(read.lines.len(), 10_000);
    row("read and checked (domain)", t.elapsed());
    let customer = api.create_customer().await;
    let t = Instant::now();
    let uploaded = api
        .upload(
            "/v1/files?workflow=two_step&rail=psp-local:sandbox",
            &customer.key,
            "bench-pain001",
            "application/xml",
            xml.clone(),
        )
        .await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    row("upload answered 202 (HTTP)", t.elapsed());
    loop {
        let file = api
            .get(&format!("/v1/files/{}", uploaded.id()), &customer.key)
            .await
            .json();
        if file["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    row("10 operations made (upload to completed)", t.elapsed());
}

/// A 100,000-row CSV report streamed over HTTP, read a chunk at a time, with the process's
/// peak memory before and after (the operations are written to the store directly, in
/// batches, as many creates would have).
async fn report_of_many(server: &ops_local::Server, api: &Api) {
    use ops_domain::ids::{IdGenerator, IdKind, UlidGenerator};
    use ops_domain::operations::OperationStatus;
    use ops_domain::ports::{Changeset, Commit, Write};
    let rows = 100_000;
    let customer = api.create_customer().await;
    let ids = UlidGenerator::default();
    let from = time::OffsetDateTime::now_utc();
    for batch in 0..rows / 1_000 {
        let writes = (0..1_000)
            .map(|i| {
                let status = if (batch + i) % 3 == 0 {
                    OperationStatus::Completed
                } else {
                    OperationStatus::PendingApproval
                };
                let id = ids.new_id(IdKind::Operation);
                let mut operation = ops_infra::conformance::store::operation(&id, &customer.id, status);
                operation.created_at = time::OffsetDateTime::now_utc();
                Write::InsertOperation(operation)
            })
            .collect();
        server
            .embedded
            .store
            .commit(Changeset { writes })
            .await
            .expect("stored");
    }
    let to = time::OffsetDateTime::now_utc() + time::Duration::SECOND;
    let rfc = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
            .replace('+', "%2B")
    };
    let url = format!(
        "{}/v1/reports/operations?from={}&to={}&format=csv",
        api.base,
        rfc(from),
        rfc(to)
    );
    let read = || async {
        let mut response = api
            .client
            .get(url.as_str())
            .bearer_auth(&customer.key)
            .send()
            .await
            .expect("report");
        assert_eq!(response.status(), 200);
        let (mut bytes, mut lines) = (0usize, 0usize);
        while let Some(chunk) = response.chunk().await.expect("a chunk") {
            bytes += chunk.len();
            lines += chunk.iter().filter(|b| **b == b'\n').count();
        }
        (bytes, lines)
    };
    let before = peak_rss_kib();
    let t = Instant::now();
    let (bytes, lines) = read().await;
    let took = t.elapsed();
    // The header, the rows, a blank line, the totals' header and two totals.
    assert_eq!(lines, rows + 5, "every row once");
    println!();
    let after_first = peak_rss_kib();
    // A second read: memory a report holds would raise the peak again; caches filled by the
    // first would not.
    read().await;
    println!("| report | rows | bytes | time ms | rows/s | peak RSS before, after one, after two (MiB) |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| GET /v1/reports/operations?format=csv | {rows} | {bytes} | {} | {:.0} | {:.0}, {:.0}, {:.0} |",
        ms(took),
        rows as f64 / took.as_secs_f64(),
        before as f64 / 1024.0,
        after_first as f64 / 1024.0,
        peak_rss_kib() as f64 / 1024.0
    );
}
