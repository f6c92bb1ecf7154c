//! A file rail: payouts to a bank that takes files wait for its cut-off in one bank file, may
//! be cancelled out of it until then, go to the bank as one pain.001 at the cut-off whatever
//! dies or fires twice, and are confirmed or failed by the bank's pain.002.

use crate::bank::{instruction_ids, Bank};
use crate::{payout, Api, Customer, TestClock, ADMIN_KEY};
use ops_domain::ports::Clock;
use ops_domain::ports::QueueName;
use ops_runtime::driver::{Driver, Trigger};
use serde_json::{json, Value};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use time::{Duration, OffsetDateTime};

/// The rail the scenarios' [`Bank`] serves.
pub const BANK_RAIL: &str = "psp-local:bank";
/// Its one cut-off a banking day, UTC.
const CUTOFF: &str = "15:00";

/// `OPS_HTTP_RAILS`' entry for `bank`.
pub fn bank_rail(bank: &Bank) -> String {
    format!("{BANK_RAIL}=file+{}", bank.base)
}

/// Gives the bank's rail a weekday calendar and its cut-off, and moves the clock to the next
/// weekday's morning.
async fn bank_with_a_cutoff(api: &Api, clock: &TestClock) {
    let calendar = api
        .post(
            "/v1/calendars",
            ADMIN_KEY,
            json!({"name": "Bank days", "timezone": "UTC"}),
        )
        .await;
    assert_eq!(calendar.status, 201, "{}", calendar.json());
    let cutoffs = json!({"calendar_id": calendar.id(), "cutoffs": [CUTOFF]});
    let saved = api
        .send(
            reqwest::Method::PUT,
            &format!("/v1/rails/{BANK_RAIL}/cutoffs"),
            Some(ADMIN_KEY),
            None,
            Some(&cutoffs),
        )
        .await;
    assert_eq!(saved.status, 200, "{}", saved.json());
    next_weekday_morning(clock);
}

/// Moves the clock to 10:00 UTC of the next weekday after today.
fn next_weekday_morning(clock: &TestClock) {
    let now = clock.now();
    let mut day = now.date().next_day().unwrap();
    while day.weekday().number_from_monday() > 5 {
        day = day.next_day().unwrap();
    }
    clock.advance(day.with_hms(10, 0, 0).unwrap().assume_utc() - now);
}

/// Today's cut-off, and a moment after it.
fn after_the_cutoff(clock: &TestClock) -> OffsetDateTime {
    let cutoff = clock.now().date().with_hms(15, 0, 0).unwrap().assume_utc();
    clock.advance(cutoff - clock.now() + Duration::seconds(30));
    cutoff
}

/// An auto-approved payout of one item of `amount` to the bank's rail; its transaction.
async fn bank_payout(api: &Api, customer: &Customer, amount: i64, driver: &Driver) -> Value {
    let mut body = payout(&customer.id, "auto", &[amount]);
    body["items"][0]["destination"]["rail"] = json!(BANK_RAIL);
    body["items"][0]["end_to_end_id"] = json!(format!("E2E-{amount}"));
    let made = api.post("/v1/operations", &customer.key, body).await;
    assert_eq!(made.status, 201, "{}", made.json());
    crate::drain(driver).await;
    let list = api
        .get(&format!("/v1/transactions?operation_id={}", made.id()), &customer.key)
        .await
        .json();
    list["data"][0].clone()
}

async fn transaction(api: &Api, key: &str, id: &str) -> Value {
    api.get(&format!("/v1/transactions/{id}"), key).await.json()
}

/// Four payouts wait in one bank file; one is cancelled before the cut-off; at the cut-off
/// (the poll firing twice at once) the bank gets one pain.001 of the other three, which are
/// `submitted` under the file's id; a cancel after it is refused naming the cut-off; the
/// bank's pain.002 confirms one and fails another, the same report again changes nothing,
/// and its camt.054 confirms the third.
pub async fn a_file_rails_payouts_go_to_the_bank_in_one_file_at_its_cutoff(
    api: &Api,
    driver: &Driver,
    clock: &TestClock,
    bank: &Bank,
) {
    bank_with_a_cutoff(api, clock).await;
    let customer = api.create_customer().await;
    let mut waiting = vec![];
    for amount in [150_000, 250_000, 350_000, 450_000] {
        waiting.push(bank_payout(api, &customer, amount, driver).await);
    }
    let file_id = waiting[0]["bank_file"].as_str().expect("in a bank file").to_owned();
    for transaction in &waiting {
        assert_eq!(transaction["status"], "pending", "{transaction}");
        assert_eq!(
            transaction["bank_file"],
            file_id.as_str(),
            "one file a cut-off: {transaction}"
        );
    }
    let open = api.get(&format!("/v1/bank_files/{file_id}"), ADMIN_KEY).await;
    assert_eq!(open.status, 200, "{}", open.json());
    let open = open.json();
    assert_eq!(
        (open["object"].as_str(), open["status"].as_str()),
        (Some("bank_file"), Some("open"))
    );
    assert_eq!(open["transaction_ids"].as_array().map(Vec::len), Some(4), "{open}");
    let early = api
        .get(&format!("/v1/bank_files/{file_id}?format=pain.001"), ADMIN_KEY)
        .await;
    assert_eq!(
        (early.status.as_u16(), early.json()["error"]["code"].as_str()),
        (409, Some("bank_file_open"))
    );
    let hidden = api.get(&format!("/v1/bank_files/{file_id}"), &customer.key).await;
    assert_eq!(hidden.status, 404, "a customer does not see the rail's files");

    let cancelled_id = waiting[3]["id"].as_str().unwrap();
    let cancelled = api
        .post(
            &format!("/v1/transactions/{cancelled_id}/cancel"),
            &customer.key,
            json!({"reason": "wrong account"}),
        )
        .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.json());
    let cancelled = cancelled.json();
    assert_eq!(cancelled["status"], "failed", "{cancelled}");
    assert_eq!(cancelled["cause"]["code"], "cancelled_before_cutoff", "{cancelled}");
    let open = api.get(&format!("/v1/bank_files/{file_id}"), ADMIN_KEY).await.json();
    assert_eq!(open["transaction_ids"].as_array().map(Vec::len), Some(3), "{open}");
    crate::settle(driver, clock, Duration::minutes(30), 3).await;
    assert!(bank.handovers().is_empty(), "nothing goes before the cut-off");

    let cutoff = after_the_cutoff(clock);
    // The poll that opens the cut-off's window, twice at once.
    let (first, second) = tokio::join!(driver.tick(), driver.tick());
    first.unwrap();
    second.unwrap();
    crate::settle(driver, clock, Duration::minutes(1), 3).await;
    let files = bank.files();
    let sent: Vec<String> = waiting[..3]
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        files,
        BTreeMap::from([(file_id.clone(), sent.clone())]),
        "one file of the three"
    );
    assert_eq!(bank.handovers().len(), 1, "handed over once");
    assert_eq!(bank.misuse(), (0, 0), "no instruction one by one, every request signed");
    let pain001 = String::from_utf8(bank.handovers()[0].1.clone()).unwrap();
    keep_for_the_schema_check(&file_id, &pain001);
    assert!(pain001.contains(&format!("<MsgId>{file_id}</MsgId>")), "{pain001}");
    assert!(pain001.contains("<EndToEndId>E2E-150000</EndToEndId>"), "{pain001}");
    assert!(pain001.contains("<CtrlSum>750000</CtrlSum>"), "{pain001}");
    for id in &sent {
        let submitted = transaction(api, &customer.key, id).await;
        assert_eq!(submitted["status"], "submitted", "{submitted}");
        assert_eq!(submitted["rail_reference"], file_id.as_str(), "{submitted}");
    }
    let handed = api.get(&format!("/v1/bank_files/{file_id}"), ADMIN_KEY).await.json();
    assert_eq!(handed["status"], "handed_over", "{handed}");
    assert_eq!(handed["rail_reference"], format!("BANK-{file_id}"), "{handed}");
    let kept = api
        .get(&format!("/v1/bank_files/{file_id}?format=pain.001"), ADMIN_KEY)
        .await;
    assert_eq!(kept.bytes, pain001.as_bytes(), "the file kept is the file sent");

    let late = api
        .post(
            &format!("/v1/transactions/{}/cancel", sent[0]),
            &customer.key,
            json!({}),
        )
        .await;
    let error = late.json();
    assert_eq!(
        (late.status.as_u16(), error["error"]["code"].as_str()),
        (409, Some("cutoff_passed")),
        "{error}"
    );
    let said = error["error"]["message"].as_str().unwrap();
    let shown = cutoff.format(&time::format_description::well_known::Rfc3339).unwrap();
    assert!(
        said.contains(&file_id) && (said.contains(&shown) || said.contains("15:00")),
        "{said}"
    );

    let report = pain002(&file_id, &[(&sent[0], "ACSC", 150_000), (&sent[1], "RJCT", 250_000)]);
    let imported = import_statement(api, "pain002", &report).await;
    assert_eq!(imported["transitions_applied"], 2, "{imported}");
    assert_eq!(transaction(api, &customer.key, &sent[0]).await["status"], "confirmed");
    assert_eq!(transaction(api, &customer.key, &sent[1]).await["status"], "failed");
    let again = import_statement(api, "pain002", &report).await;
    assert_eq!(
        again["id"], imported["id"],
        "the same report is the same reconciliation"
    );
    assert_eq!(transaction(api, &customer.key, &sent[0]).await["status"], "confirmed");
    // The bank's debit notification names the third by its InstrId, beside the customer's
    // end-to-end id; the others, confirmed the same day, are not missing from it.
    let notification = camt054(&sent[2], "E2E-350000", 350_000, clock.now().date());
    let notified = import_statement(api, "camt054", &notification).await;
    assert_eq!(notified["transitions_applied"], 1, "{notified}");
    assert_eq!(notified["outcomes"]["missing"], 0, "{notified}");
    let lines = api
        .get(
            &format!("/v1/reconciliations/{}/lines", notified["id"].as_str().unwrap()),
            ADMIN_KEY,
        )
        .await
        .json();
    assert_eq!(lines["data"][0]["transaction_id"], sent[2].as_str(), "{lines}");
    assert_eq!(
        lines["data"][0]["end_to_end_id"], "E2E-350000",
        "the customer's id is shown: {lines}"
    );
    assert_eq!(transaction(api, &customer.key, &sent[2]).await["status"], "confirmed");
    assert_eq!(bank.handovers().len(), 1);
}

/// Writes a pain.001 the service sent into `OPS_BANK_FILES_OUT` when it is set: the test
/// script sets it, and the ISO 20022 suite validates each file there against the published
/// schema.
fn keep_for_the_schema_check(file_id: &str, pain001: &str) {
    if let Ok(folder) = std::env::var("OPS_BANK_FILES_OUT") {
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(std::path::Path::new(&folder).join(format!("{file_id}.xml")), pain001).unwrap();
    }
}

/// A file rail's pain.002 for `transactions` (id, status, amount in CLP).
pub fn pain002(file_id: &str, transactions: &[(&str, &str, i64)]) -> String {
    let statuses: String = transactions
        .iter()
        .map(|(id, status, amount)| {
            format!(
                "<TxInfAndSts><OrgnlInstrId>{id}</OrgnlInstrId><TxSts>{status}</TxSts>\
                 <OrgnlTxRef><Amt><InstdAmt Ccy=\"CLP\">{amount}</InstdAmt></Amt></OrgnlTxRef></TxInfAndSts>"
            )
        })
        .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
         <Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.002.001.10\"><CstmrPmtStsRpt>\
         <GrpHdr><MsgId>BANK-PSR-{file_id}</MsgId><CreDtTm>2026-12-07T16:00:00Z</CreDtTm></GrpHdr>\
         <OrgnlGrpInfAndSts><OrgnlMsgId>{file_id}</OrgnlMsgId><OrgnlMsgNmId>pain.001.001.09</OrgnlMsgNmId></OrgnlGrpInfAndSts>\
         <OrgnlPmtInfAndSts><OrgnlPmtInfId>{file_id}-CLP</OrgnlPmtInfId>{statuses}</OrgnlPmtInfAndSts>\
         </CstmrPmtStsRpt></Document>"
    )
}

/// A bank's camt.054 debit notification of one booking of `amount` CLP on `day`, naming the
/// payment by `InstrId` and `EndToEndId`.
pub fn camt054(instruction_id: &str, end_to_end_id: &str, amount: i64, day: time::Date) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
         <Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.054.001.08\"><BkToCstmrDbtCdtNtfctn>\
         <GrpHdr><MsgId>BANK-N-{instruction_id}</MsgId><CreDtTm>{day}T18:00:00</CreDtTm></GrpHdr>\
         <Ntfctn><Id>N1</Id><Ntry><Amt Ccy=\"CLP\">{amount}</Amt><CdtDbtInd>DBIT</CdtDbtInd><Sts><Cd>BOOK</Cd></Sts>\
         <BookgDt><Dt>{day}</Dt></BookgDt><NtryDtls><TxDtls><Refs><InstrId>{instruction_id}</InstrId>\
         <EndToEndId>{end_to_end_id}</EndToEndId></Refs></TxDtls></NtryDtls></Ntry></Ntfctn>\
         </BkToCstmrDbtCdtNtfctn></Document>"
    )
}

async fn import_statement(api: &Api, format: &str, statement: &str) -> Value {
    use base64::Engine;
    let body = json!({
        "rail": BANK_RAIL,
        "format": format,
        "statement": base64::engine::general_purpose::STANDARD.encode(statement),
    });
    let imported = api.post("/v1/reconciliations", ADMIN_KEY, body).await;
    assert!(imported.status.is_success(), "{}", imported.json());
    imported.json()
}

/// A future that is dropped, as a worker that dies is, once the polls `left` to its worker
/// are spent: every await point of what it runs is a place to die at.
struct DiesAfter<'a, F> {
    work: Pin<Box<F>>,
    left: &'a Cell<usize>,
}

impl<F: Future> Future for DiesAfter<'_, F> {
    /// `None` when it died before finishing.
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        if self.left.get() == 0 {
            return Poll::Ready(None);
        }
        self.left.set(self.left.get() - 1);
        self.work.as_mut().poll(cx).map(Some)
    }
}

/// Works the submissions queue until it is empty, as one worker that dies once it has been
/// polled `polls` times; whether it died.
async fn a_worker_that_dies_after(driver: &Driver, polls: usize) -> bool {
    let left = Cell::new(polls);
    loop {
        let work = Box::pin(driver.round(Trigger::Queue(QueueName::Submissions)));
        match (DiesAfter { work, left: &left }).await {
            None => return true,
            Some(Ok(0)) => return false,
            Some(Ok(_)) => {}
            Some(Err(error)) => panic!("the pipeline failed: {error}"),
        }
    }
}

/// The kill test of a file's making and handing over. For each `n` of `kill_points`, two
/// payouts wait for a cut-off; at the cut-off the pipeline's round dies after its `n`th
/// step (closing the file, claiming its handover, writing and keeping it, the call to the
/// bank, recording the answer, marking its transactions); the pipeline then runs on as a new
/// worker would. However it died, each transaction is in exactly one file the bank got, and
/// a file the bank got twice is the same bytes. The bank answers slowly, so some deaths fall
/// between its taking the file and the service hearing so; and a last worker dies, for
/// certain, while the bank answers: the next one asks, and does not send the file again.
/// The sweep stops once a round finishes before its death point.
pub async fn a_transaction_is_in_one_file_the_bank_gets_however_the_worker_dies(
    api: &Api,
    driver: &Driver,
    clock: &TestClock,
    bank: &Bank,
    kill_points: impl Iterator<Item = usize>,
) {
    bank_with_a_cutoff(api, clock).await;
    bank.answer_after(20);
    let customer = api.create_customer().await;
    let mut deaths = 0;
    for (round, polls) in kill_points.enumerate() {
        let mut ids = vec![];
        let mut file_id = String::new();
        for amount in [10_000, 20_000] {
            let made = bank_payout(api, &customer, amount + round as i64, driver).await;
            ids.push(made["id"].as_str().unwrap().to_owned());
            file_id = made["bank_file"].as_str().unwrap().to_owned();
        }
        after_the_cutoff(clock);
        // The poll at the cut-off queues the file's transactions; the worker that takes them
        // makes and hands over the file, and dies on the way.
        driver.round(Trigger::StatusPoll).await.unwrap();
        let died = a_worker_that_dies_after(driver, polls).await;
        deaths += usize::from(died);
        let taken = bank.handovers().iter().filter(|(id, _)| *id == file_id).count();
        let recorded = api.get(&format!("/v1/bank_files/{file_id}"), ADMIN_KEY).await.json();
        // Died after the bank took the file and before the service heard so.
        let answer_lost = died && taken == 1 && recorded["status"] == "closed";
        // A new worker, once the dead one's claims have gone stale.
        clock.advance(Duration::minutes(2));
        crate::settle(driver, clock, Duration::minutes(5), 6).await;
        let mut holding: BTreeMap<&String, Vec<&String>> = BTreeMap::new();
        let files = bank.files();
        for (file, transactions) in &files {
            for id in transactions {
                holding.entry(id).or_default().push(file);
            }
        }
        for id in &ids {
            assert_eq!(
                holding.get(id).map(Vec::len),
                Some(1),
                "after dying at step {polls}, {id} is in one file the bank got: {files:?}"
            );
            let sent = transaction(api, &customer.key, id).await;
            assert_eq!(sent["status"], "submitted", "after dying at step {polls}: {sent}");
        }
        let mut bytes_of: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for (file, bytes) in bank.handovers() {
            let first = bytes_of.entry(file.clone()).or_insert_with(|| bytes.clone());
            assert!(*first == bytes, "{file} handed over twice, the second time different");
            assert_eq!(instruction_ids(&String::from_utf8(bytes).unwrap()).len(), 2);
        }
        assert_eq!(bank.misuse(), (0, 0));
        if answer_lost {
            let taken = bank.handovers().iter().filter(|(id, _)| *id == file_id).count();
            assert_eq!(taken, 1, "a file whose answer was lost is asked about, not sent again");
        }
        if !died {
            break;
        }
        next_weekday_morning(clock);
    }
    assert!(deaths >= 5, "the worker died at {deaths} places only");

    // A worker that dies while the bank answers, for certain: the bank has the file, the
    // service never heard so. The next worker asks the bank, which has it: not sent again.
    next_weekday_morning(clock);
    bank.answer_after(3_000);
    let made = bank_payout(api, &customer, 30_000, driver).await;
    let file_id = made["bank_file"].as_str().unwrap().to_owned();
    after_the_cutoff(clock);
    driver.round(Trigger::StatusPoll).await.unwrap();
    let worker = a_worker_that_dies_after(driver, usize::MAX);
    assert!(tokio::time::timeout(std::time::Duration::from_millis(1_000), worker)
        .await
        .is_err());
    let taken = || bank.handovers().iter().filter(|(id, _)| *id == file_id).count();
    assert_eq!(taken(), 1, "the bank took the file");
    let recorded = api.get(&format!("/v1/bank_files/{file_id}"), ADMIN_KEY).await.json();
    assert_eq!(recorded["status"], "closed", "the service did not hear so: {recorded}");
    bank.answer_after(0);
    clock.advance(Duration::minutes(2));
    crate::settle(driver, clock, Duration::minutes(5), 6).await;
    let recorded = api.get(&format!("/v1/bank_files/{file_id}"), ADMIN_KEY).await.json();
    assert_eq!(recorded["status"], "handed_over", "{recorded}");
    assert_eq!(
        (taken(), recorded["handovers"].as_u64()),
        (1, Some(1)),
        "asked, not sent again: {recorded}"
    );
    let sent = transaction(api, &customer.key, made["id"].as_str().unwrap()).await;
    assert_eq!(sent["status"], "submitted", "{sent}");
}
