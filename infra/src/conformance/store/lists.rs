//! Lists: newest first, filtered, paged, within a read budget a page.

use super::{audit, changes, operation};
use ops_domain::approvals::{Action, Conditions, Rule, Workflow, WorkflowDefinition, WorkflowOwner};
use ops_domain::event::Event;
use ops_domain::money::Amount;
use ops_domain::operations::OperationQuery;
use ops_domain::operations::{Beneficiary, Destination, Item, Operation, OperationStatus, OperationType};
use ops_domain::ports::{Store, Write};
use ops_domain::webhooks::EventQuery;

pub(super) async fn lists_are_newest_first_filtered_and_paged(store: &dyn Store) {
    for i in 0..5 {
        let status = if i % 2 == 0 {
            OperationStatus::PendingApproval
        } else {
            OperationStatus::Rejected
        };
        let op = operation(&format!("op_l{i}"), "cus_l", status);
        store.commit(changes(vec![Write::InsertOperation(op)])).await.unwrap();
    }
    let listed = |query: OperationQuery| async move {
        let found = store.operations(&query).await.unwrap();
        found.items.into_iter().map(|o| o.id).collect::<Vec<_>>()
    };
    let query = OperationQuery {
        customer_id: Some("cus_l".into()),
        limit: 3,
        ..Default::default()
    };
    assert_eq!(listed(query.clone()).await, ["op_l4", "op_l3", "op_l2"]);
    let next = OperationQuery {
        starting_after: Some("op_l2".into()),
        ..query.clone()
    };
    assert_eq!(listed(next).await, ["op_l1", "op_l0"]);
    let pending = OperationQuery {
        status: Some(OperationStatus::PendingApproval),
        ..query.clone()
    };
    assert_eq!(listed(pending).await, ["op_l4", "op_l2", "op_l0"]);
    let other = OperationQuery {
        customer_id: Some("cus_other".into()),
        ..query
    };
    assert!(listed(other).await.is_empty());

    // The platform's lists span every customer (op_a1 is cus_a's, from the first test).
    let platform = OperationQuery {
        limit: 3,
        ..Default::default()
    };
    assert_eq!(listed(platform.clone()).await, ["op_l4", "op_l3", "op_l2"]);
    let next = OperationQuery {
        starting_after: Some("op_l2".into()),
        ..platform.clone()
    };
    assert_eq!(listed(next).await, ["op_l1", "op_l0", "op_a1"]);
    let approved = OperationQuery {
        status: Some(OperationStatus::Approved),
        ..platform.clone()
    };
    assert_eq!(listed(approved).await, ["op_a1"]);
    let rejected_after = OperationQuery {
        status: Some(OperationStatus::Rejected),
        starting_after: Some("op_l3".into()),
        ..platform
    };
    assert_eq!(listed(rejected_after).await, ["op_l1"]);
}

/// Approved and processing operations may share a list in a store ([`crate::aws`] keeps them
/// in one): each status's list still finds exactly its own, newest first, page after page, for
/// a customer and for the platform, including an operation that moved from one to the other.
/// Answers how many pages stopped short of their limit (at a store's read budget).
pub async fn statuses_sharing_a_list_are_listed_apart(store: &dyn Store) -> usize {
    let approved_at = [3, 8];
    let mut writes = vec![];
    for i in 0..12 {
        let status = if approved_at.contains(&i) {
            OperationStatus::Approved
        } else {
            OperationStatus::Processing
        };
        writes.push(Write::InsertOperation(operation(
            &format!("op_sh{i:02}"),
            "cus_sh",
            status,
        )));
    }
    let mut moved = operation("op_sh12", "cus_sh", OperationStatus::Approved);
    writes.push(Write::InsertOperation(moved.clone()));
    store.commit(changes(writes)).await.unwrap();
    moved.status = OperationStatus::Processing;
    moved.version = 2;
    store
        .commit(changes(vec![Write::UpdateOperation(moved)]))
        .await
        .unwrap();

    let newest_first = |statuses: &[OperationStatus]| {
        let mut ids: Vec<String> = (0..13)
            .filter(|i| {
                let approved = approved_at.contains(i);
                statuses.contains(&if approved {
                    OperationStatus::Approved
                } else {
                    OperationStatus::Processing
                })
            })
            .map(|i| format!("op_sh{i:02}"))
            .collect();
        ids.reverse();
        ids
    };
    let mut stopped_short = 0;
    for customer in [Some("cus_sh"), None] {
        for status in [OperationStatus::Approved, OperationStatus::Processing] {
            let (mut found, mut after) = (Vec::<String>::new(), None::<String>);
            for page in 0.. {
                assert!(page < 60, "paging does not end");
                let query = OperationQuery {
                    customer_id: customer.map(Into::into),
                    status: Some(status),
                    starting_after: after.take().map(|id| id.as_str().into()),
                    limit: 3,
                    ..Default::default()
                };
                let listed = store.operations(&query).await.unwrap();
                assert!(listed.items.iter().all(|op| op.status == status), "{status:?}");
                let full = listed.items.len() == query.limit;
                let last = listed.items.last().map(|op| op.id.to_string());
                found.extend(listed.items.iter().map(|op| op.id.to_string()));
                after = match (listed.read_up_to, full) {
                    (Some(read_up_to), false) => {
                        stopped_short += 1;
                        Some(read_up_to)
                    }
                    (_, true) => last,
                    (None, false) => break,
                };
            }
            found.retain(|id| id.starts_with("op_sh"));
            assert_eq!(found, newest_first(&[status]), "{status:?} of {customer:?}");
        }
    }
    stopped_short
}

/// Run on a store that reads at most three rows or entries a request for a filter that is no
/// key (its test sets that): a `type` filter pages through a history longer than that, and
/// finds every match once, newest first, some pages stopping short and saying where they read
/// up to; for the customer's lists and the platform's, of operations and of events.
pub async fn type_filters_read_a_bounded_stretch_a_page(store: &dyn Store) {
    let (mut writes, mut collections, mut approvals) = (vec![], vec![], vec![]);
    for i in 0..30 {
        let mut op = operation(&format!("op_t{i:02}"), "cus_t", OperationStatus::Completed);
        if i % 10 == 3 {
            op.kind = OperationType::Collection;
            collections.push(op.id.to_string());
        }
        let event_id = format!("evt_t{i:02}");
        let kind = if i % 10 == 7 { "approved" } else { "created" };
        if kind == "approved" {
            approvals.push(event_id.clone());
        }
        writes.push(Write::Event(Event::of_operation(event_id.as_str().into(), kind, &op)));
        writes.push(Write::InsertOperation(op));
    }
    for chunk in writes.chunks(24) {
        store.commit(changes(chunk.to_vec())).await.unwrap();
    }
    collections.reverse();
    approvals.reverse();
    for customer in [Some("cus_t"), None] {
        let operations = page_through(|after| collections_after(store, customer, after)).await;
        assert_eq!(operations, collections, "{customer:?}");
        let events = page_through(|after| async move {
            let query = EventQuery {
                customer_id: customer.map(Into::into),
                kind: Some("operation.approved".into()),
                starting_after: after.map(|id| id.as_str().into()),
                limit: 11,
            };
            let listed = store.events(&query).await.unwrap();
            (
                listed.items.iter().map(|e| e.id.to_string()).collect(),
                listed.read_up_to,
            )
        })
        .await;
        assert_eq!(events, approvals, "{customer:?}");
    }
}

/// One page of the collections among `customer`'s operations (the platform's: `None`) after
/// `after`: their ids, and where the read stopped short, if it did.
pub async fn collections_after(
    store: &dyn Store,
    customer: Option<&str>,
    after: Option<String>,
) -> (Vec<String>, Option<String>) {
    let query = OperationQuery {
        customer_id: customer.map(Into::into),
        kind: Some(OperationType::Collection),
        starting_after: after.map(|id| id.as_str().into()),
        limit: 11,
        ..Default::default()
    };
    let listed = store.operations(&query).await.unwrap();
    (
        listed.items.iter().map(|o| o.id.to_string()).collect(),
        listed.read_up_to,
    )
}

/// Every id a list finds, page after page (`read` gets where the last page read up to, and
/// returns a page's ids and where it stopped short, if it did); at least one page must have.
pub async fn page_through<F, Fut>(read: F) -> Vec<String>
where
    F: Fn(Option<String>) -> Fut,
    Fut: std::future::Future<Output = (Vec<String>, Option<String>)>,
{
    let (mut found, mut after, mut stopped_short) = (vec![], None, 0);
    for _ in 0..60 {
        let (ids, read_up_to) = read(after.take()).await;
        found.extend(ids);
        match read_up_to {
            Some(id) => {
                stopped_short += 1;
                after = Some(id);
            }
            None => {
                assert!(stopped_short > 0, "no page stopped at the read budget");
                return found;
            }
        }
    }
    panic!("paging does not end");
}

/// An operation's transactions are found from it, in the order of their ids: those made so far
/// of the ones its items name, and no other operation's.
pub(super) async fn an_operations_transactions_are_found_from_it(store: &dyn Store) {
    let mut op = operation("op_txs", "cus_txs", OperationStatus::Processing);
    op.items = ["itm_txs_b", "itm_txs_a", "itm_txs_c"]
        .into_iter()
        .map(|id| Item {
            end_to_end_id: None,
            instruction_id: None,
            id: id.into(),
            beneficiary: Some(Beneficiary {
                id_type: "RUT".into(),
                id: "1".into(),
            }),
            destination: Destination {
                rail: "psp-local:sandbox".into(),
                account: "1".into(),
                account_id: None,
            },
            amount: Amount::new(100).unwrap(),
            reference: None,
            transaction_id: Some(id.replace("itm_", "txn_").into()),
        })
        .collect();
    let made = |id: &str, operation: &str| {
        let mut transaction = crate::conformance::reconciliations::transaction(id, "psp-local:sandbox", None);
        transaction.operation_id = operation.into();
        Write::InsertTransaction(transaction)
    };
    store
        .commit(changes(vec![
            Write::InsertOperation(op.clone()),
            made("txn_txs_b", "op_txs"),
            made("txn_txs_a", "op_txs"),
            made("txn_txs_other", "op_txs_other"),
        ]))
        .await
        .unwrap();
    let found: Vec<String> = store
        .transactions_of_operation(&op)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id.to_string())
        .collect();
    assert_eq!(found, ["txn_txs_a", "txn_txs_b"], "the third is not made yet");
}

/// An owner's workflows (floors among them) by name, from after a name, and no one else's.
pub(super) async fn an_owners_workflows_are_listed_by_name(store: &dyn Store) {
    let saved = |owner: &WorkflowOwner, name: &str| {
        Write::PutWorkflow(Workflow {
            name: name.into(),
            owner: owner.clone(),
            definition: WorkflowDefinition {
                description: None,
                matching: Default::default(),
                approval_ttl: None,
                rules: vec![Rule {
                    when: Conditions::default(),
                    then: Action::Approve,
                }],
            },
            version: 1,
        })
    };
    let owner = WorkflowOwner::Customer("cus_wf".into());
    let mut writes: Vec<Write> = ["zeta", "alpha", "floor:payout", "mid"]
        .iter()
        .map(|name| saved(&owner, name))
        .collect();
    writes.push(saved(&WorkflowOwner::Customer("cus_wf2".into()), "beta"));
    writes.push(saved(&WorkflowOwner::Platform, "beta"));
    store.commit(changes(writes)).await.unwrap();
    for (after, limit, expected) in [
        ("", 10, &["alpha", "floor:payout", "mid", "zeta"][..]),
        ("alpha", 2, &["floor:payout", "mid"]),
        ("mid", 10, &["zeta"]),
        ("zeta", 10, &[]),
    ] {
        let found = store.workflows_after(&owner, after, limit).await.unwrap();
        let names: Vec<&str> = found.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, expected, "after {after:?}");
        assert!(found.iter().all(|w| w.owner == owner));
    }
}

/// Operations found by an item reference, a beneficiary id or a rail reference: a customer's
/// newest first, the platform's grouped by customer, page after page, whichever way their
/// operation or transaction was written (alone, with its events, or in a transaction).
pub(super) async fn operations_are_found_by_the_values_they_carry(store: &dyn Store) {
    use ops_domain::operations::{FindBy, OperationFind};
    use ops_domain::transactions::TransactionStatus;
    let item = |reference: &str, beneficiary: &str| Item {
        end_to_end_id: None,
        instruction_id: None,
        id: format!("itm_{reference}_{beneficiary}").into(),
        beneficiary: Some(Beneficiary {
            id_type: "RUT".into(),
            id: beneficiary.into(),
        }),
        destination: Destination {
            rail: "psp-local:sandbox".into(),
            account: "1".into(),
            account_id: None,
        },
        amount: Amount::new(100).unwrap(),
        reference: Some(reference.into()),
        transaction_id: None,
    };
    let mut first = operation("op_f1", "cus_f1", OperationStatus::Processing);
    first.items = vec![item("INV-1", "B1"), item("INV-2", "B1")];
    let mut second = operation("op_f2", "cus_f1", OperationStatus::PendingApproval);
    second.items = vec![item("INV-1", "B2")];
    let mut other = operation("op_f3", "cus_f2", OperationStatus::PendingApproval);
    other.items = vec![item("INV-1", "B1")];
    store
        .commit(changes(vec![Write::InsertOperation(first)]))
        .await
        .unwrap();
    store
        .commit(changes(vec![
            Write::InsertOperation(second.clone()),
            Write::Event(Event::of_operation("evt_f2".into(), "created", &second)),
            super::audit("op_f2", "pending_approval"),
        ]))
        .await
        .unwrap();
    store
        .commit(changes(vec![Write::InsertOperation(other)]))
        .await
        .unwrap();
    let mut transaction = crate::conformance::reconciliations::transaction("txn_f1", "psp-local:sandbox", None);
    (transaction.operation_id, transaction.customer_id) = ("op_f1".into(), "cus_f1".into());
    (transaction.status, transaction.rail_reference, transaction.status_polls) = (TransactionStatus::Pending, None, 0);
    store
        .commit(changes(vec![Write::InsertTransaction(transaction.clone())]))
        .await
        .unwrap();
    transaction.status = TransactionStatus::Submitted;
    transaction.rail_reference = Some("RAIL-1".into());
    transaction.version = 2;
    store
        .commit(changes(vec![
            Write::UpdateTransaction(transaction.clone()),
            Write::Event(Event::of_transaction("evt_f1".into(), &transaction)),
        ]))
        .await
        .unwrap();

    let found = |by: FindBy, value: &str, customer: Option<&str>, after: Option<(&str, &str)>, limit: usize| {
        let find = OperationFind {
            by,
            value: value.into(),
            customer_id: customer.map(Into::into),
            after: after.map(|(customer, op)| (customer.into(), op.into())),
            limit,
        };
        async move {
            let found = store.find_operations(&find).await.unwrap();
            found.into_iter().map(|o| o.id.to_string()).collect::<Vec<_>>()
        }
    };
    use FindBy::*;
    assert_eq!(
        found(ItemReference, "INV-1", Some("cus_f1"), None, 10).await,
        ["op_f2", "op_f1"]
    );
    assert_eq!(
        found(ItemReference, "INV-1", None, None, 10).await,
        ["op_f3", "op_f2", "op_f1"]
    );
    assert_eq!(found(ItemReference, "INV-1", None, None, 2).await, ["op_f3", "op_f2"]);
    assert_eq!(
        found(ItemReference, "INV-1", None, Some(("cus_f1", "op_f2")), 2).await,
        ["op_f1"]
    );
    assert_eq!(
        found(ItemReference, "INV-1", Some("cus_f1"), Some(("cus_f1", "op_f2")), 2).await,
        ["op_f1"]
    );
    assert_eq!(found(ItemReference, "INV-2", None, None, 10).await, ["op_f1"]);
    assert_eq!(
        found(BeneficiaryId, "B1", Some("cus_f1"), None, 10).await,
        ["op_f1"],
        "two items of one operation paid B1: it is found once"
    );
    assert_eq!(found(BeneficiaryId, "B1", None, None, 10).await, ["op_f3", "op_f1"]);
    assert_eq!(found(RailReference, "RAIL-1", None, None, 10).await, ["op_f1"]);
    assert!(found(RailReference, "RAIL-1", Some("cus_f2"), None, 10)
        .await
        .is_empty());
    assert!(
        found(ItemReference, "B1", None, None, 10).await.is_empty(),
        "each kind its own values"
    );
    assert!(found(ItemReference, "INV-9", None, None, 10).await.is_empty());
}

/// Transactions in a watched status are listed across operations, newest first, by customer
/// or for the platform, a page at a time; one that moves on leaves the list.
pub(super) async fn watched_transactions_are_listed_by_status(store: &dyn Store) {
    use ops_domain::transactions::TransactionStatus::{self, *};
    let transaction = |id: &str, customer: &str, status: TransactionStatus| {
        let mut t = crate::conformance::reconciliations::transaction(id, "psp-local:sandbox", None);
        (t.customer_id, t.operation_id, t.status) = (customer.into(), "op_w".into(), status);
        t
    };
    let mut writes = vec![];
    for (id, customer, status) in [
        ("txn_w1", "cus_w1", Unknown),
        ("txn_w2", "cus_w2", Unknown),
        ("txn_w3", "cus_w1", NeedsAttention),
        ("txn_w4", "cus_w1", Unknown),
        ("txn_w5", "cus_w1", Submitted),
    ] {
        writes.push(Write::InsertTransaction(transaction(id, customer, status)));
    }
    store.commit(changes(writes)).await.unwrap();
    let listed = |status: TransactionStatus, customer: Option<&str>, after: Option<&str>, limit: usize| {
        let (customer, after) = (customer.map(Into::into), after.map(Into::into));
        async move {
            let found = store
                .transactions_in(status, customer.as_ref(), after.as_ref(), limit)
                .await
                .unwrap();
            found.into_iter().map(|t| t.id.to_string()).collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(Unknown, Some("cus_w1"), None, 10).await, ["txn_w4", "txn_w1"]);
    assert_eq!(listed(Unknown, None, None, 10).await, ["txn_w4", "txn_w2", "txn_w1"]);
    assert_eq!(listed(Unknown, None, None, 2).await, ["txn_w4", "txn_w2"]);
    assert_eq!(listed(Unknown, None, Some("txn_w2"), 2).await, ["txn_w1"]);
    assert_eq!(listed(NeedsAttention, None, None, 10).await, ["txn_w3"]);
    assert!(listed(NeedsAttention, Some("cus_w2"), None, 10).await.is_empty());

    // Asked and answered: it leaves the list.
    let mut settled = transaction("txn_w4", "cus_w1", Confirmed);
    settled.version = 2;
    store
        .commit(changes(vec![Write::UpdateTransaction(settled)]))
        .await
        .unwrap();
    assert_eq!(listed(Unknown, Some("cus_w1"), None, 10).await, ["txn_w1"]);
}

/// An operations list narrowed to a window of ids (a creation time's first id on) and a range
/// of amounts, alone or with a status, page after page.
pub(super) async fn operations_are_listed_within_a_window_and_an_amount_range(store: &dyn Store) {
    let mut writes = vec![];
    for i in 1..=5i64 {
        let status = if i == 3 {
            OperationStatus::Approved
        } else {
            OperationStatus::PendingApproval
        };
        let mut op = operation(&format!("op_r{i}"), "cus_r", status);
        op.total_amount = 100 * i;
        writes.push(Write::InsertOperation(op));
    }
    store.commit(changes(writes)).await.unwrap();
    let listed = |query: OperationQuery| async move {
        let found = store.operations(&query).await.unwrap();
        found.items.into_iter().map(|o| o.id.to_string()).collect::<Vec<_>>()
    };
    let of_customer = OperationQuery {
        customer_id: Some("cus_r".into()),
        limit: 10,
        ..Default::default()
    };
    let from = |id: &str| OperationQuery {
        created_from: Some(id.into()),
        ..of_customer.clone()
    };
    assert_eq!(listed(from("op_r2")).await, ["op_r5", "op_r4", "op_r3", "op_r2"]);
    let paged = OperationQuery {
        starting_after: Some("op_r4".into()),
        ..from("op_r2")
    };
    assert_eq!(listed(paged).await, ["op_r3", "op_r2"]);
    let ranged = OperationQuery {
        min_amount: Some(200),
        max_amount: Some(400),
        ..of_customer.clone()
    };
    assert_eq!(listed(ranged.clone()).await, ["op_r4", "op_r3", "op_r2"]);
    let both = OperationQuery {
        min_amount: Some(300),
        ..from("op_r4")
    };
    assert_eq!(listed(both).await, ["op_r5", "op_r4"]);
    let approved = OperationQuery {
        status: Some(OperationStatus::Approved),
        ..ranged.clone()
    };
    assert_eq!(listed(approved).await, ["op_r3"]);
    let pending = OperationQuery {
        status: Some(OperationStatus::PendingApproval),
        limit: 1,
        ..ranged
    };
    assert_eq!(listed(pending.clone()).await, ["op_r4"]);
    let next = OperationQuery {
        starting_after: Some("op_r4".into()),
        ..pending
    };
    assert_eq!(listed(next).await, ["op_r2"]);
}

/// The expiry timer's list: operations still pending approval past their expiry, soonest
/// first; one decided since (or without a ttl, or not yet due) is not on it.
pub async fn operations_pending_approval_are_found_by_their_expiry(store: &dyn Store) {
    let at = time::OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
    let pending = |id: &str, expires_in: Option<i64>| {
        let mut op = operation(id, "cus_expiry", OperationStatus::PendingApproval);
        op.approval_expires_at = expires_in.map(|seconds| at + time::Duration::seconds(seconds));
        op
    };
    let (later, sooner, waits, approved) = (
        pending("op_expiry_later", Some(60)),
        pending("op_expiry_sooner", Some(30)),
        pending("op_expiry_waits", None),
        pending("op_expiry_approved", Some(10)),
    );
    let inserts = [&later, &sooner, &waits, &approved]
        .into_iter()
        .flat_map(|op| {
            [
                Write::InsertOperation(op.clone()),
                audit(op.id.as_str(), "pending_approval"),
            ]
        })
        .collect();
    store.commit(changes(inserts)).await.unwrap();
    let mut decided = approved.clone();
    (decided.status, decided.version) = (OperationStatus::Approved, 2);
    store
        .commit(changes(vec![
            Write::UpdateOperation(decided),
            audit("op_expiry_approved", "approved"),
        ]))
        .await
        .unwrap();
    let ids = |ops: Vec<Operation>| ops.into_iter().map(|op| op.id.to_string()).collect::<Vec<_>>();
    assert!(ids(store.approvals_expiring(at, 10).await.unwrap()).is_empty());
    assert_eq!(
        ids(store
            .approvals_expiring(at + time::Duration::seconds(30), 10)
            .await
            .unwrap()),
        ["op_expiry_sooner"]
    );
    let all = at + time::Duration::days(1);
    assert_eq!(
        ids(store.approvals_expiring(all, 10).await.unwrap()),
        ["op_expiry_sooner", "op_expiry_later"]
    );
    assert_eq!(
        ids(store.approvals_expiring(all, 1).await.unwrap()),
        ["op_expiry_sooner"]
    );
    let mut expired = sooner.clone();
    (expired.status, expired.version) = (OperationStatus::Expired, 2);
    store
        .commit(changes(vec![
            Write::UpdateOperation(expired),
            audit("op_expiry_sooner", "expired"),
        ]))
        .await
        .unwrap();
    assert_eq!(
        ids(store.approvals_expiring(all, 10).await.unwrap()),
        ["op_expiry_later"]
    );
}
