//! Accounts, movements and holds.

use super::{cause, changes};
use ops_domain::access::Environment;
use ops_domain::ids::AccountId;
use ops_domain::ledger::{
    Account, AccountKind, AccountQuery, Balances, Movement, MovementOf, MovementStatus, MovementTransition, Posting,
};
use ops_domain::money::Amount;
use ops_domain::money::Currency;
use ops_domain::ports::{Changeset, Store, StoreError, Write};
use std::sync::Arc;
use time::OffsetDateTime;

fn account(id: &str, customer: Option<&str>, kind: AccountKind) -> Account {
    Account {
        id: id.into(),
        customer_id: customer.map(Into::into),
        currency: Currency::parse("CLP").unwrap(),
        name: id.into(),
        kind,
        rail: (kind == AccountKind::Settlement).then(|| format!("psp-local:{id}")),
        balances: Balances::default(),
        environment: Environment::Test,
        created_at: OffsetDateTime::UNIX_EPOCH,
    }
}

fn movement(id: &str, debit: &Account, credit: &Account, amount: i64, status: MovementStatus) -> Movement {
    Movement::between(
        id.into(),
        debit,
        credit,
        Amount::new(amount).unwrap(),
        status,
        MovementOf::default(),
        cause("test"),
    )
}

/// The writes of a posting, as the use cases make them.
fn posting(place: Vec<(Movement, Option<&AccountId>)>, settle: Vec<Movement>) -> Changeset {
    let mut posting = Posting::default();
    for (movement, guarded) in place {
        posting.place(movement, &guarded.into_iter().collect::<Vec<_>>());
    }
    for movement in settle {
        posting.settle(movement);
    }
    let mut changes = Changeset::default();
    posting.write_to(
        &mut changes,
        &ops_domain::ids::UlidGenerator::default(),
        Environment::Test,
    );
    changes
}

pub(super) async fn accounts_keep_their_balances_and_movements(store: &dyn Store) {
    let customer = account("acc_l1", Some("cus_l"), AccountKind::Customer);
    let settlement = account("acc_l2", None, AccountKind::Settlement);
    let funding = account("acc_l3", None, AccountKind::Adjustments);
    for a in [&customer, &settlement, &funding] {
        store
            .commit(changes(vec![Write::InsertAccount(a.clone())]))
            .await
            .unwrap();
    }
    let second = account("acc_l4", Some("cus_l"), AccountKind::Customer);
    assert!(
        matches!(
            store.commit(changes(vec![Write::InsertAccount(second)])).await,
            Err(StoreError::Conflict)
        ),
        "one account per holder and currency"
    );
    let clp = Currency::parse("CLP").unwrap();
    assert_eq!(store.account_of("cus_l", &clp).await.unwrap().unwrap().id, customer.id);
    assert!(store
        .account_of("cus_l", &Currency::parse("USD").unwrap())
        .await
        .unwrap()
        .is_none());

    let fund = movement("mov_l1", &funding, &customer, 1_000, MovementStatus::Posted);
    store.commit(posting(vec![(fund, None)], vec![])).await.unwrap();
    let hold = movement("mov_l2", &customer, &settlement, 700, MovementStatus::Pending);
    store
        .commit(posting(vec![(hold.clone(), Some(&customer.id))], vec![]))
        .await
        .unwrap();
    let balances = |a: Account| (a.balances.posted, a.balances.pending(), a.balances.available());
    assert_eq!(
        balances(store.account(&customer.id).await.unwrap().unwrap()),
        (1_000, 300, 300)
    );
    // A second hold beyond what is available is refused whole: no movement, no balance.
    let greedy = movement("mov_l3", &customer, &settlement, 301, MovementStatus::Pending);
    assert!(matches!(
        store.commit(posting(vec![(greedy, Some(&customer.id))], vec![])).await,
        Err(StoreError::Conflict)
    ));
    assert!(store.movement(&"mov_l3".into()).await.unwrap().is_none());
    assert_eq!(
        balances(store.account(&customer.id).await.unwrap().unwrap()),
        (1_000, 300, 300)
    );
    // The same movement twice is a conflict, not a second hold.
    assert!(matches!(
        store
            .commit(posting(vec![(hold.clone(), Some(&customer.id))], vec![]))
            .await,
        Err(StoreError::Conflict)
    ));
    let mut posted = hold.clone();
    posted.apply(MovementTransition::Post(cause("confirmed"))).unwrap();
    store.commit(posting(vec![], vec![posted.clone()])).await.unwrap();
    assert!(
        matches!(
            store.commit(posting(vec![], vec![posted])).await,
            Err(StoreError::Conflict)
        ),
        "a movement settles once"
    );
    assert_eq!(
        balances(store.account(&customer.id).await.unwrap().unwrap()),
        (300, 300, 300)
    );
    assert_eq!(
        balances(store.account(&settlement.id).await.unwrap().unwrap()),
        (700, 700, 700)
    );
    assert_eq!(
        balances(store.account(&funding.id).await.unwrap().unwrap()),
        (-1_000, -1_000, -1_000)
    );
    let lists = store
        .accounts(&AccountQuery {
            customer_id: Some("cus_l".into()),
            limit: 10,
            ..AccountQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(lists.len(), 1);
    assert_eq!(lists[0].balances.available(), 300, "lists carry the current balances");
    let in_clp = store
        .accounts(&AccountQuery {
            currency: Some(clp.clone()),
            limit: 10,
            ..AccountQuery::default()
        })
        .await
        .unwrap();
    assert!(in_clp.len() >= 3);
    let of_customer: Vec<String> = store
        .movements_of(&customer.id, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id.to_string())
        .collect();
    assert_eq!(of_customer, ["mov_l2", "mov_l1"], "debits and credits, newest first");
    let page = store
        .movements_of(&customer.id, Some(&"mov_l2".into()), 10)
        .await
        .unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(
        store.movement(&"mov_l2".into()).await.unwrap().unwrap().status,
        MovementStatus::Posted
    );
}

/// Many holds racing for one account's last funds: exactly as many win as the funds cover,
/// and the balance ends exactly at what the winners left.
pub(super) async fn a_hot_account_is_never_overdrawn_by_concurrent_holds(store: Arc<dyn Store>, racers: usize) {
    let mut customer = account(
        &format!("acc_hot{racers}"),
        Some(&format!("cus_hot{racers}")),
        AccountKind::Customer,
    );
    let mut settlement = account(&format!("acc_hots{racers}"), None, AccountKind::Settlement);
    let mut funding = account(&format!("acc_hotf{racers}"), None, AccountKind::Adjustments);
    // The platform holds one account per currency: each race has its own.
    let currency = Currency::parse(if racers < 10 { "USD" } else { "EUR" }).unwrap();
    for a in [&mut customer, &mut settlement, &mut funding] {
        a.currency = currency.clone();
    }
    for a in [&customer, &settlement, &funding] {
        store
            .commit(changes(vec![Write::InsertAccount(a.clone())]))
            .await
            .unwrap();
    }
    let funds = (racers as i64 / 2) * 100 + 50;
    let fund = movement(
        &format!("mov_hotf{racers}"),
        &funding,
        &customer,
        funds,
        MovementStatus::Posted,
    );
    store.commit(posting(vec![(fund, None)], vec![])).await.unwrap();
    let tasks: Vec<_> = (0..racers)
        .map(|n| {
            let store = store.clone();
            let hold = movement(
                &format!("mov_hot{racers}x{n}"),
                &customer,
                &settlement,
                100,
                MovementStatus::Pending,
            );
            let guarded = customer.id.clone();
            tokio::spawn(async move {
                loop {
                    match store
                        .commit(posting(vec![(hold.clone(), Some(&guarded))], vec![]))
                        .await
                    {
                        Ok(()) => return true,
                        Err(StoreError::Conflict) => {
                            // Lost to the guard or to a concurrent transaction: look again.
                            let now = store.account(&guarded).await.unwrap().unwrap();
                            if now.balances.available() < 100 {
                                return false;
                            }
                        }
                        Err(other) => panic!("{other}"),
                    }
                }
            })
        })
        .collect();
    let mut won = 0;
    for task in tasks {
        won += usize::from(task.await.unwrap());
    }
    assert_eq!(won, racers / 2, "{racers} racers");
    let account = store.account(&customer.id).await.unwrap().unwrap();
    assert_eq!(account.balances.available(), 50);
    assert_eq!(account.balances.pending_debits, won as i64 * 100);
}

/// An account's balance at the end of a past day is what it holds now less what the days
/// after posted; holds (pending) never count, and an unknown account has none.
pub(super) async fn an_accounts_balance_at_the_end_of_a_day_is_read_back(store: &dyn Store) {
    // In a currency of their own: the platform holds one adjustments account per currency.
    let gbp = |account: Account| Account {
        currency: Currency::parse("GBP").unwrap(),
        ..account
    };
    let settlement = gbp(account("acc_d1", None, AccountKind::Settlement));
    let funding = gbp(account("acc_d2", None, AccountKind::Adjustments));
    for a in [&settlement, &funding] {
        store
            .commit(changes(vec![Write::InsertAccount(a.clone())]))
            .await
            .unwrap();
    }
    let on = |day: time::Date, id: &str, amount: i64, status: MovementStatus| {
        let mut moved = movement(id, &funding, &settlement, amount, status);
        moved.cause.at = day.midnight().assume_utc() + time::Duration::hours(12);
        moved.created_at = moved.cause.at;
        moved.posted_at = (status == MovementStatus::Posted).then_some(moved.cause.at);
        moved
    };
    use time::macros::date;
    let (monday, tuesday, thursday) = (date!(2026 - 11 - 23), date!(2026 - 11 - 24), date!(2026 - 11 - 26));
    store
        .commit(posting(
            vec![(on(monday, "mov_d1", 1_000, MovementStatus::Posted), None)],
            vec![],
        ))
        .await
        .unwrap();
    store
        .commit(posting(
            vec![
                (on(tuesday, "mov_d2", 300, MovementStatus::Posted), None),
                (on(tuesday, "mov_d3", 50, MovementStatus::Pending), None),
            ],
            vec![],
        ))
        .await
        .unwrap();
    // The hold placed on Tuesday, posted on Thursday: Thursday's.
    let mut hold = store.movement(&"mov_d3".into()).await.unwrap().unwrap();
    let mut posted_cause = cause("posted");
    posted_cause.at = thursday.midnight().assume_utc();
    hold.apply(MovementTransition::Post(posted_cause)).unwrap();
    store.commit(posting(vec![], vec![hold])).await.unwrap();
    let at_end_of = |day| store.posted_at_end_of(&settlement.id, day);
    assert_eq!(at_end_of(date!(2026 - 11 - 22)).await.unwrap(), Some(0));
    assert_eq!(at_end_of(monday).await.unwrap(), Some(1_000));
    assert_eq!(
        at_end_of(tuesday).await.unwrap(),
        Some(1_300),
        "the hold is not posted yet"
    );
    assert_eq!(at_end_of(date!(2026 - 11 - 25)).await.unwrap(), Some(1_300));
    assert_eq!(at_end_of(thursday).await.unwrap(), Some(1_350));
    assert_eq!(store.posted_at_end_of(&funding.id, monday).await.unwrap(), Some(-1_000));
    assert_eq!(store.posted_at_end_of(&"acc_none".into(), monday).await.unwrap(), None);
}
