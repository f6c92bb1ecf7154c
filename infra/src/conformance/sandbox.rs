//! The sandbox ledger port's behaviour, through the rail over it: each implementation's tests
//! call [`run_all`]. Two rails over one ledger stand for two functions of a stack (the submit
//! worker and the status poll): what one was told, the other knows.

use crate::rails::{statement_of, SandboxEntry, SandboxLedger, SandboxRail};
use ops_domain::access::Environment;
use ops_domain::ids::{IdGenerator, IdKind, TransactionId, UlidGenerator};
use ops_domain::money::{Amount, Currency};
use ops_domain::operations::Beneficiary;
use ops_domain::rail::{Ack, Instruction, RailAdapter, RailDirection, RailError, RailState};
use std::sync::Arc;

/// A fresh transaction's instruction for `amount` (its last two digits choose the outcome).
fn instruction(amount: i64) -> Instruction {
    let id = UlidGenerator::default().new_id(IdKind::Transaction);
    instruction_for(&id, amount)
}

/// The sandbox's instruction to pay `amount` CLP for transaction `transaction_id`.
pub fn instruction_for(transaction_id: &str, amount: i64) -> Instruction {
    let ids = UlidGenerator::default();
    Instruction {
        end_to_end_id: None,
        transaction_id: TransactionId::from(transaction_id),
        operation_id: ids.new_id(IdKind::Operation).as_str().into(),
        customer_id: ids.new_id(IdKind::Customer).as_str().into(),
        amount: Amount::new(amount).expect("positive"),
        currency: Currency::parse("CLP").expect("a currency"),
        beneficiary: Beneficiary {
            id_type: "RUT".into(),
            id: "11111111-1".into(),
        },
        account: "000123456".into(),
        reference: None,
        environment: Environment::Test,
        direction: RailDirection::Credit,
    }
}

async fn entry(rail: &SandboxRail, instruction: &Instruction) -> SandboxEntry {
    rail.entries()
        .await
        .into_iter()
        .find(|e| e.transaction_id == instruction.transaction_id.as_str())
        .expect("the rail has an entry for the transaction")
}

fn confirmed(instruction: &Instruction) -> RailState {
    RailState::Confirmed {
        rail_reference: format!("sbx_{}", instruction.transaction_id.trim_start_matches("txn_")),
    }
}

pub async fn run_all(ledger: Arc<dyn SandboxLedger>) {
    let worker = SandboxRail::new(ledger.clone());
    let poll = SandboxRail::new(ledger);

    // Accepted by one function, confirmed to the other; a second submit is answered the same
    // and counted as a duplicate.
    let plain = instruction(150_000);
    assert!(matches!(worker.submit(&plain).await, Ok(Ack::Accepted { .. })));
    assert_eq!(
        poll.status(&plain.transaction_id, None).await.unwrap(),
        confirmed(&plain)
    );
    assert!(matches!(poll.submit(&plain).await, Ok(Ack::Accepted { .. })));
    let seen = entry(&worker, &plain).await;
    assert_eq!(
        (
            seen.amount,
            seen.currency.as_str(),
            seen.submit_calls,
            seen.duplicate_submits,
            seen.status_calls
        ),
        (150_000, "CLP", 2, 1, 1)
    );
    assert_eq!(seen.accepted_on, Some(time::OffsetDateTime::now_utc().date()));

    // A rail that never saw a transaction says so, and keeps no entry for the inquiry.
    let unseen = instruction(100);
    assert_eq!(
        worker.status(&unseen.transaction_id, None).await.unwrap(),
        RailState::NotFound
    );
    assert!(!worker
        .entries()
        .await
        .iter()
        .any(|e| e.transaction_id == unseen.transaction_id.as_str()));

    let rejected = instruction(10_001);
    assert!(matches!(worker.submit(&rejected).await, Ok(Ack::Rejected { code, .. }) if code == "account_closed"));
    assert_eq!(
        poll.status(&rejected.transaction_id, None).await.unwrap(),
        RailState::NotFound
    );

    let busy_twice = instruction(10_003);
    for call in 1..=2 {
        let busy = worker.submit(&busy_twice).await;
        assert!(matches!(busy, Err(RailError::Transient(_))), "call {call}: {busy:?}");
    }
    assert!(matches!(worker.submit(&busy_twice).await, Ok(Ack::Accepted { .. })));
    assert_eq!(
        entry(&poll, &busy_twice).await.duplicate_submits,
        0,
        "retries of a refused submit"
    );

    // A timeout the rail took is found by asking; one it never took is not.
    let taken = instruction(10_004);
    assert!(matches!(worker.submit(&taken).await, Err(RailError::Timeout)));
    assert_eq!(
        poll.status(&taken.transaction_id, None).await.unwrap(),
        confirmed(&taken)
    );
    let lost = instruction(10_008);
    assert!(matches!(worker.submit(&lost).await, Err(RailError::Timeout)));
    assert_eq!(
        poll.status(&lost.transaction_id, None).await.unwrap(),
        RailState::NotFound
    );

    // Outcomes that depend on how often the rail was asked count every inquiry, whichever
    // function asks.
    let late = instruction(10_005);
    worker.submit(&late).await.unwrap();
    for rail in [&worker, &poll, &worker] {
        assert_eq!(
            rail.status(&late.transaction_id, None).await.unwrap(),
            RailState::Pending
        );
    }
    assert_eq!(poll.status(&late.transaction_id, None).await.unwrap(), confirmed(&late));
    let returned = instruction(10_006);
    worker.submit(&returned).await.unwrap();
    assert_eq!(
        poll.status(&returned.transaction_id, None).await.unwrap(),
        confirmed(&returned)
    );
    assert!(matches!(
        worker.status(&returned.transaction_id, None).await.unwrap(),
        RailState::Returned { .. }
    ));
    let failed = instruction(10_002);
    worker.submit(&failed).await.unwrap();
    assert!(matches!(
        poll.status(&failed.transaction_id, None).await.unwrap(),
        RailState::Failed { .. }
    ));

    // Submits racing for one new transaction are all counted, on one entry (which of them
    // count as duplicates depends on when the first acceptance was recorded).
    let raced = instruction(20_000);
    let answers = futures_util::future::join_all((0..6).map(|n| [&worker, &poll][n % 2].submit(&raced))).await;
    assert!(
        answers.iter().all(|a| matches!(a, Ok(Ack::Accepted { .. }))),
        "{answers:?}"
    );
    let entries = worker.entries().await;
    let raced: Vec<_> = entries
        .iter()
        .filter(|e| e.transaction_id == raced.transaction_id.as_str())
        .collect();
    assert_eq!((raced.len(), raced[0].submit_calls), (1, 6));

    // A collection's instruction: the money comes in.
    let collection = Instruction {
        direction: RailDirection::Debit,
        ..instruction(160_000)
    };
    assert!(matches!(worker.submit(&collection).await, Ok(Ack::Accepted { .. })));
    poll.status(&collection.transaction_id, None).await.unwrap();

    // The statement lists what the rail took, with the outcome it reports and the way its
    // money went on the service's account: out for a payout, in for a collection.
    let statement = statement_of(&poll.entries().await);
    let direction = |instruction: &Instruction| {
        statement
            .lines()
            .find(|l| l.contains(instruction.transaction_id.as_str()))
            .and_then(|l| l.split(',').nth(6))
            .map(str::to_owned)
    };
    assert_eq!(direction(&plain).as_deref(), Some("debit"));
    assert_eq!(direction(&collection).as_deref(), Some("credit"));
    let line = |instruction: &Instruction| {
        statement
            .lines()
            .find(|l| l.contains(instruction.transaction_id.as_str()))
            .map(|l| l.split(',').nth(4).expect("a status column").to_owned())
    };
    assert_eq!(line(&plain).as_deref(), Some("confirmed"));
    assert_eq!(line(&returned).as_deref(), Some("returned"));
    assert_eq!(line(&failed).as_deref(), Some("failed"));
    assert_eq!(line(&rejected), None, "a rejected instruction was never taken");
    assert_eq!(line(&lost), None);
    assert_eq!(statement, poll.statement().await);
}
