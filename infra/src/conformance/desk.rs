//! The desk's part of the store port: work items listed oldest due first by queue, status,
//! customer and holder; one item not done per queue and subject; one winner per race.

use ops_domain::access::Environment;
use ops_domain::cause::{Actor, Cause};
use ops_domain::desk::board::{column_bucket, queue_bucket, BoardCount, BoardEntry, BoardMove, Column};
use ops_domain::desk::{
    Assignee, Queue, Subject, SubjectType, WorkItem, WorkItemQuery, WorkItemStatus, WorkItemTransition,
};
use ops_domain::ids::{CustomerId, WorkItemId};
use ops_domain::money::Currency;
use ops_domain::operations::OperationStatus;
use ops_domain::ports::{Changeset, Store, StoreError, Write};
use std::sync::Arc;
use time::{Duration, OffsetDateTime};

fn at(seconds: i64) -> OffsetDateTime {
    OffsetDateTime::UNIX_EPOCH + Duration::seconds(1_800_000_000 + seconds)
}

fn cause(code: &str, seconds: i64) -> Cause {
    Cause::new(code, code, Actor::system(), at(seconds))
}

fn work_item(id: &str, queue: Queue, subject: &str, customer: &str, due: i64) -> WorkItem {
    WorkItem {
        id: id.into(),
        queue,
        kind: "approval".into(),
        subject: Subject {
            kind: SubjectType::Operation,
            id: subject.into(),
        },
        customer_id: customer.into(),
        status: WorkItemStatus::Open,
        assignee: None,
        claimed_until: None,
        required_role: None,
        subject_created_by: (queue == Queue::Approvals).then(|| "usr_maker".into()),
        subject_decided_by: vec![],
        cause: cause("opened", 0),
        created_at: at(0),
        due_at: at(due),
        done_at: None,
        resolution: None,
        message: None,
        environment: Environment::Test,
        version: 1,
    }
}

async fn a_dead_letters_body_is_kept_on_its_item(store: &dyn Store) {
    let body = r#"{"task":"submit_transaction.v1","transaction_id":"txn_dead"}"#;
    let item = WorkItem {
        kind: "dead_letter".into(),
        subject: Subject {
            kind: SubjectType::DeadLetter,
            id: "9f0c2a1e-5b7d-4e8a-a1b2-c3d4e5f60718".into(),
        },
        message: Some(body.into()),
        ..work_item("wi_deadletter", Queue::Exceptions, "", "cus_dead", 50)
    };
    commit(store, Write::InsertWorkItem(item.clone())).await.unwrap();
    assert_eq!(store.work_item(&item.id).await.unwrap(), Some(item.clone()));
    assert_eq!(
        store
            .open_work_item(Queue::Exceptions, &item.subject.id)
            .await
            .unwrap()
            .and_then(|found| found.message),
        Some(body.to_owned())
    );
}

async fn commit(store: &dyn Store, write: Write) -> Result<(), StoreError> {
    store.commit(Changeset { writes: vec![write] }).await
}

fn ids(items: &[WorkItem]) -> Vec<&str> {
    items.iter().map(|i| i.id.as_str()).collect()
}

pub async fn run_all(store: Arc<dyn Store>) {
    work_items_are_listed_oldest_due_first_by_every_filter(store.as_ref()).await;
    a_subject_has_one_item_not_done_per_queue(store.as_ref()).await;
    a_dead_letters_body_is_kept_on_its_item(store.as_ref()).await;
    racing_claims_of_one_item_have_one_winner(store.clone(), 16).await;
    the_board_counts_moves_once_and_queues_as_items_open_and_close(store.as_ref()).await;
    board_sums_past_64_bits_are_exact_and_come_back_to_zero(store.as_ref()).await;
    a_move_and_its_items_change_count_together_or_not_at_all(store.as_ref()).await;
    derived_changesets_committed_together_count_each_once(store.as_ref()).await;
}

async fn work_items_are_listed_oldest_due_first_by_every_filter(store: &dyn Store) {
    // Inserted out of due order, two customers, both queues.
    let items = [
        work_item("wi_l3", Queue::Approvals, "op_l3", "cus_wa", 300),
        work_item("wi_l1", Queue::Approvals, "op_l1", "cus_wa", 100),
        work_item("wi_l2", Queue::Approvals, "op_l2", "cus_wb", 200),
        work_item("wi_l4", Queue::Exceptions, "op_l4", "cus_wa", 50),
    ];
    for item in &items {
        commit(store, Write::InsertWorkItem(item.clone())).await.unwrap();
    }
    // Ten to a page unless the query says.
    let list = |query: WorkItemQuery| async move {
        let limit = if query.limit == 0 { 10 } else { query.limit };
        store.work_items(&WorkItemQuery { limit, ..query }).await.unwrap()
    };
    let approvals = list(WorkItemQuery {
        queue: Some(Queue::Approvals),
        status: Some(WorkItemStatus::Open),
        ..WorkItemQuery::default()
    })
    .await;
    assert_eq!(ids(&approvals), ["wi_l1", "wi_l2", "wi_l3"]);
    let of_a = list(WorkItemQuery {
        customer_id: Some("cus_wa".into()),
        ..WorkItemQuery::default()
    })
    .await;
    assert_eq!(
        ids(&of_a),
        ["wi_l4", "wi_l1", "wi_l3"],
        "every queue and status of a customer"
    );
    let paged = list(WorkItemQuery {
        queue: Some(Queue::Approvals),
        starting_after: Some("wi_l1".into()),
        limit: 1,
        ..WorkItemQuery::default()
    })
    .await;
    assert_eq!(ids(&paged), ["wi_l2"]);

    // wi_l3 is claimed: it leaves the open list and joins its holder's.
    let mut claimed = items[0].clone();
    claimed
        .apply(
            WorkItemTransition::Claim {
                assignee: "usr_w1".into(),
                until: at(1_000),
                cause: cause("claimed", 1),
            },
            at(1),
        )
        .unwrap();
    commit(store, Write::UpdateWorkItem(claimed.clone())).await.unwrap();
    assert_eq!(store.work_item(&claimed.id).await.unwrap(), Some(claimed.clone()));
    let open = list(WorkItemQuery {
        queue: Some(Queue::Approvals),
        status: Some(WorkItemStatus::Open),
        ..WorkItemQuery::default()
    })
    .await;
    assert_eq!(ids(&open), ["wi_l1", "wi_l2"]);
    let held = list(WorkItemQuery {
        assignee: Some(Assignee::Holder("usr_w1".into())),
        ..WorkItemQuery::default()
    })
    .await;
    assert_eq!(ids(&held), ["wi_l3"]);
    let held_elsewhere = list(WorkItemQuery {
        assignee: Some(Assignee::Holder("usr_w1".into())),
        customer_id: Some("cus_wb".into()),
        ..WorkItemQuery::default()
    })
    .await;
    assert!(held_elsewhere.is_empty());
    let unassigned = list(WorkItemQuery {
        assignee: Some(Assignee::Unassigned),
        customer_id: Some("cus_wa".into()),
        ..WorkItemQuery::default()
    })
    .await;
    assert_eq!(ids(&unassigned), ["wi_l4", "wi_l1"]);

    // A stale update loses.
    assert!(matches!(
        commit(store, Write::UpdateWorkItem(claimed)).await,
        Err(StoreError::Conflict)
    ));
}

async fn a_subject_has_one_item_not_done_per_queue(store: &dyn Store) {
    let first = work_item("wi_s1", Queue::Exceptions, "txn_s", "cus_ws", 10);
    commit(store, Write::InsertWorkItem(first.clone())).await.unwrap();
    let second = work_item("wi_s2", Queue::Exceptions, "txn_s", "cus_ws", 20);
    assert!(matches!(
        commit(store, Write::InsertWorkItem(second.clone())).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        store.open_work_item(Queue::Exceptions, "txn_s").await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(store.open_work_item(Queue::Approvals, "txn_s").await.unwrap(), None);
    let mut other_queue = work_item("wi_s3", Queue::Approvals, "txn_s", "cus_ws", 20);
    commit(store, Write::InsertWorkItem(other_queue.clone())).await.unwrap();
    // An approval's first decider is kept on its item.
    other_queue.record_decider("usr_first", cause("approval_recorded", 3), at(3));
    commit(store, Write::UpdateWorkItem(other_queue.clone())).await.unwrap();
    assert_eq!(
        store.open_work_item(Queue::Approvals, "txn_s").await.unwrap(),
        Some(other_queue)
    );

    let mut closed = first;
    closed
        .apply(WorkItemTransition::Close(cause("resolved", 5)), at(5))
        .unwrap();
    commit(store, Write::UpdateWorkItem(closed.clone())).await.unwrap();
    assert_eq!(store.open_work_item(Queue::Exceptions, "txn_s").await.unwrap(), None);
    let done = store.work_item(&closed.id).await.unwrap().unwrap();
    assert_eq!(
        (done.status, done.resolution.map(|r| r.cause.code)),
        (WorkItemStatus::Done, Some("resolved".to_string()))
    );
    // Resolved, the subject may need attention again.
    commit(store, Write::InsertWorkItem(second.clone())).await.unwrap();
    assert_eq!(
        store.open_work_item(Queue::Exceptions, "txn_s").await.unwrap(),
        Some(second)
    );
}

async fn racing_claims_of_one_item_have_one_winner(store: Arc<dyn Store>, racers: usize) {
    let item = work_item("wi_r1", Queue::Approvals, "op_r1", "cus_wr", 10);
    commit(store.as_ref(), Write::InsertWorkItem(item.clone()))
        .await
        .unwrap();
    let claims = (0..racers).map(|racer| {
        let (store, mut item) = (store.clone(), item.clone());
        async move {
            item.apply(
                WorkItemTransition::Claim {
                    assignee: format!("usr_r{racer}"),
                    until: at(1_000),
                    cause: cause("claimed", 1),
                },
                at(1),
            )
            .unwrap();
            commit(store.as_ref(), Write::UpdateWorkItem(item)).await
        }
    });
    let outcomes = futures_util::future::join_all(claims).await;
    let won = outcomes.iter().filter(|o| o.is_ok()).count();
    let lost = outcomes
        .iter()
        .filter(|o| matches!(o, Err(StoreError::Conflict)))
        .count();
    assert_eq!((won, lost), (1, racers - 1), "{outcomes:?}");
    let stored = store.work_item(&WorkItemId::from("wi_r1")).await.unwrap().unwrap();
    assert_eq!(stored.version, 2);
    assert!(stored.assignee.is_some_and(|a| a.starts_with("usr_r")));
}

fn counted(counts: &[BoardCount], bucket: &str) -> (i64, i128) {
    counts
        .iter()
        .filter(|c| c.bucket == bucket)
        .fold((0, 0), |(n, a), c| (n + c.count, a + c.amount))
}

/// Operations near the largest total, enough of them to pass 2^63 in one customer's column
/// and across two customers on the platform's board: counted exactly, and exactly back to
/// nothing when they leave the column.
async fn board_sums_past_64_bits_are_exact_and_come_back_to_zero(store: &dyn Store) {
    const LARGE: i64 = 4_000_000_000_000_000_000;
    let pending = column_bucket(Column::PendingApproval);
    let platform_before = counted(&store.board_counts(None).await.unwrap(), &pending);
    let entry = |n: usize, column, version| BoardEntry {
        operation_id: format!("op_large{n}").as_str().into(),
        customer_id: if n < 3 { "cus_large_a" } else { "cus_large_b" }.into(),
        currency: Currency::parse("USD").unwrap(),
        amount: LARGE,
        column,
        operation_version: version,
        event_id: format!("evt_large{n}_{version}").as_str().into(),
        version,
    };
    for n in 0..5 {
        let moved = BoardMove {
            entry: entry(n, Some(Column::PendingApproval), 1),
            from: None,
        };
        commit(store, Write::MoveOnBoard(moved)).await.unwrap();
    }
    let a = counted(
        &store.board_counts(Some(&"cus_large_a".into())).await.unwrap(),
        &pending,
    );
    assert_eq!(a, (3, 3 * i128::from(LARGE)), "past i64::MAX in one customer's column");
    let platform = counted(&store.board_counts(None).await.unwrap(), &pending);
    assert_eq!(
        platform,
        (platform_before.0 + 5, platform_before.1 + 5 * i128::from(LARGE))
    );
    for n in 0..5 {
        let cancelled = BoardMove {
            entry: entry(n, None, 2),
            from: Some(Column::PendingApproval),
        };
        commit(store, Write::MoveOnBoard(cancelled)).await.unwrap();
    }
    let a = counted(
        &store.board_counts(Some(&"cus_large_a".into())).await.unwrap(),
        &pending,
    );
    assert_eq!(a, (0, 0), "exactly nothing once they left");
    assert_eq!(
        counted(&store.board_counts(None).await.unwrap(), &pending),
        platform_before
    );
}

async fn the_board_counts_moves_once_and_queues_as_items_open_and_close(store: &dyn Store) {
    let customer = CustomerId::from("cus_board");
    let platform_before = store.board_counts(None).await.unwrap();
    let entry = |column, version, event: &str| BoardEntry {
        operation_id: "op_board1".into(),
        customer_id: customer.clone(),
        currency: Currency::parse("CLP").unwrap(),
        amount: 700,
        column,
        operation_version: version,
        event_id: event.into(),
        version,
    };
    let pending = BoardMove {
        entry: entry(Some(Column::PendingApproval), 1, "evt_1"),
        from: None,
    };
    commit(store, Write::MoveOnBoard(pending.clone())).await.unwrap();
    let moved = BoardMove {
        entry: entry(Some(Column::InProgress), 2, "evt_2"),
        from: Some(Column::PendingApproval),
    };
    commit(store, Write::MoveOnBoard(moved.clone())).await.unwrap();
    assert!(
        matches!(
            commit(store, Write::MoveOnBoard(moved)).await,
            Err(StoreError::Conflict)
        ),
        "a move is made once"
    );
    assert!(matches!(
        commit(store, Write::MoveOnBoard(pending)).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        store.board_entry(&"op_board1".into()).await.unwrap().map(|e| e.column),
        Some(Some(Column::InProgress))
    );
    let counts = store.board_counts(Some(&customer)).await.unwrap();
    assert_eq!(counted(&counts, &column_bucket(Column::PendingApproval)), (0, 0));
    assert_eq!(counted(&counts, &column_bucket(Column::InProgress)), (1, 700));
    let platform = store.board_counts(None).await.unwrap();
    let in_progress = column_bucket(Column::InProgress);
    let before = counted(&platform_before, &in_progress);
    assert_eq!(
        counted(&platform, &in_progress),
        (before.0 + 1, before.1 + 700),
        "the platform's too"
    );

    // Work items count on their queue while not done; past due by their due time.
    let item = WorkItem {
        customer_id: customer.clone(),
        ..work_item("wi_board", Queue::Exceptions, "txn_board", "cus_board", 100)
    };
    commit(store, Write::InsertWorkItem(item.clone())).await.unwrap();
    let queue = queue_bucket(Queue::Exceptions);
    assert_eq!(
        counted(&store.board_counts(Some(&customer)).await.unwrap(), &queue),
        (1, 0)
    );
    assert_eq!(
        store
            .past_due(Queue::Exceptions, Some(&customer), at(99), 10)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .past_due(Queue::Exceptions, Some(&customer), at(101), 10)
            .await
            .unwrap(),
        1
    );
    let mut closed = item;
    closed
        .apply(WorkItemTransition::Close(cause("resolved", 5)), at(5))
        .unwrap();
    commit(store, Write::UpdateWorkItem(closed)).await.unwrap();
    assert_eq!(
        counted(&store.board_counts(Some(&customer)).await.unwrap(), &queue),
        (0, 0)
    );
    assert_eq!(
        store
            .past_due(Queue::Exceptions, Some(&customer), at(101), 10)
            .await
            .unwrap(),
        0
    );

    // The oldest operation of a column is found without reading the others.
    for (id, created) in [("op_board2", 10), ("op_board3", 20)] {
        let mut operation = crate::conformance::store::operation(id, "cus_board", OperationStatus::PendingApproval);
        operation.created_at = at(created);
        commit(store, Write::InsertOperation(operation)).await.unwrap();
    }
    assert_eq!(
        store
            .oldest_in_column(Column::PendingApproval, Some(&customer))
            .await
            .unwrap(),
        Some(at(10))
    );
    assert_eq!(
        store
            .oldest_in_column(Column::InProgress, Some(&customer))
            .await
            .unwrap(),
        None
    );
}

/// The desk writes an operation's move on the board and its item's opening or closing, made
/// by the same event, as one changeset: both are counted, or neither (a stale item refuses
/// the move with it), and the queue's count is where the board adds it up.
async fn a_move_and_its_items_change_count_together_or_not_at_all(store: &dyn Store) {
    let customer = CustomerId::from("cus_merge");
    let platform_before = store.board_counts(None).await.unwrap();
    let (pending, in_progress) = (
        column_bucket(Column::PendingApproval),
        column_bucket(Column::InProgress),
    );
    let approvals = queue_bucket(Queue::Approvals);
    let entry = |column, version, event: &str| BoardEntry {
        operation_id: "op_merge".into(),
        customer_id: customer.clone(),
        currency: Currency::parse("CLP").unwrap(),
        amount: 900,
        column: Some(column),
        operation_version: version,
        event_id: event.into(),
        version,
    };
    let item = WorkItem {
        customer_id: customer.clone(),
        ..work_item("wi_merge", Queue::Approvals, "op_merge", "cus_merge", 100)
    };
    let opened = Changeset {
        writes: vec![
            Write::MoveOnBoard(BoardMove {
                entry: entry(Column::PendingApproval, 1, "evt_m1"),
                from: None,
            }),
            Write::InsertWorkItem(item.clone()),
        ],
    };
    store.commit(opened).await.unwrap();
    let counts = store.board_counts(Some(&customer)).await.unwrap();
    assert_eq!(counted(&counts, &pending), (1, 900));
    assert_eq!(counted(&counts, &approvals), (1, 0));

    let mut closed = item.clone();
    closed
        .apply(WorkItemTransition::Close(cause("approved", 5)), at(5))
        .unwrap();
    let decided = |closed: WorkItem| Changeset {
        writes: vec![
            Write::MoveOnBoard(BoardMove {
                entry: entry(Column::InProgress, 2, "evt_m2"),
                from: Some(Column::PendingApproval),
            }),
            Write::UpdateWorkItem(closed),
        ],
    };
    let mut stale = closed.clone();
    stale.version += 1;
    assert!(matches!(store.commit(decided(stale)).await, Err(StoreError::Conflict)));
    let counts = store.board_counts(Some(&customer)).await.unwrap();
    assert_eq!(
        counted(&counts, &pending),
        (1, 900),
        "the move was refused with the item"
    );
    assert_eq!(counted(&counts, &approvals), (1, 0));
    assert_eq!(
        store
            .board_entry(&"op_merge".into())
            .await
            .unwrap()
            .and_then(|e| e.column),
        Some(Column::PendingApproval)
    );

    store.commit(decided(closed)).await.unwrap();
    let counts = store.board_counts(Some(&customer)).await.unwrap();
    assert_eq!(counted(&counts, &pending), (0, 0));
    assert_eq!(counted(&counts, &in_progress), (1, 900));
    assert_eq!(counted(&counts, &approvals), (0, 0));
    assert_eq!(store.open_work_item(Queue::Approvals, "op_merge").await.unwrap(), None);
    let platform = store.board_counts(None).await.unwrap();
    for (bucket, added) in [(&pending, (0, 0)), (&in_progress, (1, 900)), (&approvals, (0, 0))] {
        let before = counted(&platform_before, bucket);
        assert_eq!(
            counted(&platform, bucket),
            (before.0 + added.0, before.1 + added.1),
            "{bucket} on the platform's board"
        );
    }
}

/// The desk commits a batch's moves together (`commit_derived_each`; on DynamoDB one
/// transaction, each customer's counters updated once in it). Each changeset still counts on
/// its own terms: a refused one (a stale move) changes nothing, the others count once, and the
/// same moves committed again are refused, counting nothing more.
async fn derived_changesets_committed_together_count_each_once(store: &dyn Store) {
    let customers = [CustomerId::from("cus_wave1"), CustomerId::from("cus_wave2")];
    let moved = |n: usize, customer: &CustomerId, version: u64| Changeset {
        writes: vec![Write::MoveOnBoard(BoardMove {
            entry: BoardEntry {
                operation_id: format!("op_wave{n}").into(),
                customer_id: customer.clone(),
                currency: Currency::parse("CLP").unwrap(),
                amount: 100 * n as i64,
                column: Some(Column::PendingApproval),
                operation_version: version,
                event_id: format!("evt_wave{n}").into(),
                version,
            },
            from: None,
        })],
    };
    let item = WorkItem {
        customer_id: customers[0].clone(),
        ..work_item("wi_wave", Queue::Exceptions, "txn_wave", "cus_wave1", 100)
    };
    let wave = |stale: u64| {
        vec![
            moved(1, &customers[0], 1),
            // A second version of an entry never written: refused.
            moved(2, &customers[0], stale),
            moved(3, &customers[1], 1),
            moved(4, &customers[0], 1),
            Changeset {
                writes: vec![Write::InsertWorkItem(item.clone())],
            },
        ]
    };
    let outcomes = store.commit_derived_each(wave(2)).await;
    assert!(
        matches!(
            outcomes.as_slice(),
            [Ok(()), Err(StoreError::Conflict), Ok(()), Ok(()), Ok(())]
        ),
        "{outcomes:?}"
    );
    let (pending, exceptions) = (
        &column_bucket(Column::PendingApproval),
        &queue_bucket(Queue::Exceptions),
    );
    let count_of = |customer| async move {
        let counts = store.board_counts(Some(customer)).await.unwrap();
        (counted(&counts, pending), counted(&counts, exceptions))
    };
    assert_eq!(count_of(&customers[0]).await, ((2, 500), (1, 0)));
    assert_eq!(count_of(&customers[1]).await, ((1, 300), (0, 0)));
    assert_eq!(store.board_entry(&"op_wave2".into()).await.unwrap(), None);

    // Delivered again, every move but the stale one is refused, and the stale one still is.
    let again = store.commit_derived_each(wave(2)).await;
    assert!(
        again.iter().all(|outcome| matches!(outcome, Err(StoreError::Conflict))),
        "{again:?}"
    );
    assert_eq!(count_of(&customers[0]).await, ((2, 500), (1, 0)));
    assert_eq!(count_of(&customers[1]).await, ((1, 300), (0, 0)));
}
