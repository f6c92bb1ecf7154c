//! Customers, users and API keys, including documents stored before versions.

use super::changes;
use ops_domain::access::{ApiKey, Customer, CustomerStatus, Environment, Role, Scope, User, UserStatus};
use ops_domain::ports::{Store, StoreError, Write};
use time::OffsetDateTime;

fn api_key(id: &str, customer: Option<&str>) -> ApiKey {
    ApiKey {
        id: id.into(),
        name: Some(format!("the {id} integration")),
        customer_id: customer.map(Into::into),
        user_id: None,
        environment: Environment::Test,
        scopes: vec![Scope::OperationsRead],
        created_at: OffsetDateTime::UNIX_EPOCH,
        expires_at: None,
        revoked_at: None,
        created_by: Some("key_minter".into()),
        lineage: vec![],
        rotated_to: None,
        secret_hash: format!("hash-of-{id}"),
        version: 1,
    }
}

fn user(id: &str, customer: &str) -> User {
    User {
        id: id.into(),
        customer_id: customer.into(),
        name: id.into(),
        email: format!("{id}@example.com"),
        roles: vec![Role::Approver],
        status: UserStatus::Active,
        created_at: OffsetDateTime::UNIX_EPOCH,
        version: 1,
        delegation: None,
    }
}

/// Customers are listed newest first (by id), a page at a time, and changed in place.
pub(super) async fn customers_are_listed_newest_first_a_page_at_a_time(store: &dyn Store) {
    let customer = |id: &str| Customer {
        id: id.into(),
        name: format!("Customer {id}"),
        status: CustomerStatus::Active,
        metadata: Default::default(),
        collection_reserve: Default::default(),
        created_at: OffsetDateTime::UNIX_EPOCH,
        version: 1,
    };
    // Ids after every other case's, so they head the list.
    let writes = ["cus_zzzz1", "cus_zzzz2", "cus_zzzz3"]
        .map(|id| Write::InsertCustomer(customer(id)))
        .to_vec();
    store.commit(changes(writes)).await.unwrap();
    let ids = |customers: Vec<Customer>| customers.into_iter().map(|c| c.id.to_string()).collect::<Vec<_>>();
    assert_eq!(
        ids(store.customers(None, None, 2).await.unwrap()),
        ["cus_zzzz3", "cus_zzzz2"]
    );
    let next = store.customers(None, Some(&"cus_zzzz2".into()), 1).await.unwrap();
    assert_eq!(next, [customer("cus_zzzz1")], "as stored, after the page's start");

    // A change is in place, from the version it read: read and listed once, as the customer
    // now stands; a change from a version since replaced, or of no stored customer, is a
    // conflict and writes nothing.
    let suspended = Customer {
        status: CustomerStatus::Suspended,
        version: 2,
        ..customer("cus_zzzz2")
    };
    store
        .commit(changes(vec![Write::UpdateCustomer(suspended.clone())]))
        .await
        .unwrap();
    assert_eq!(store.customer(&suspended.id).await.unwrap(), Some(suspended.clone()));
    let listed = store.customers(None, None, 3).await.unwrap();
    assert_eq!(
        listed,
        [customer("cus_zzzz3"), suspended.clone(), customer("cus_zzzz1")]
    );
    // Each status is a list of its own, paged the same way, which a change moves it between
    // (other cases' customers, listed after these, are left out).
    let in_status = |status, after: Option<&str>, limit| {
        let after = after.map(ops_domain::ids::CustomerId::from);
        async move {
            let mut listed = ids(store.customers(Some(status), after.as_ref(), limit).await.unwrap());
            listed.retain(|id| id.starts_with("cus_zzzz"));
            listed
        }
    };
    assert_eq!(in_status(CustomerStatus::Suspended, None, 10).await, ["cus_zzzz2"]);
    assert_eq!(in_status(CustomerStatus::Active, None, 1).await, ["cus_zzzz3"]);
    assert_eq!(
        in_status(CustomerStatus::Active, Some("cus_zzzz3"), 1).await,
        ["cus_zzzz1"],
        "a status's page starts after the one named, past the others' customers"
    );
    let renamed_from_before = Customer {
        name: "Renamed".into(),
        version: 2,
        ..customer("cus_zzzz2")
    };
    for refused in [
        renamed_from_before,
        Customer {
            version: 2,
            ..customer("cus_zzzz0")
        },
    ] {
        let conflict = store.commit(changes(vec![Write::UpdateCustomer(refused)])).await;
        assert!(matches!(conflict, Err(StoreError::Conflict)), "{conflict:?}");
    }
    assert_eq!(store.customer(&suspended.id).await.unwrap(), Some(suspended));
    assert_eq!(store.customer(&"cus_zzzz0".into()).await.unwrap(), None);
}

/// A customer's users hold distinct emails, letters in any case: a user made with one another
/// user of the customer has is refused whole, with nothing of it written; another customer's
/// user may have it.
pub(super) async fn a_customers_users_hold_distinct_emails(store: &dyn Store) {
    let first = User {
        email: "Ana@Example.com".into(),
        ..user("usr_02a", "cus_emails")
    };
    store
        .commit(changes(vec![Write::InsertUser(first.clone())]))
        .await
        .unwrap();
    let same_person = User {
        email: "ana@EXAMPLE.COM".into(),
        ..user("usr_02b", "cus_emails")
    };
    let refused = store
        .commit(changes(vec![Write::InsertUser(same_person.clone())]))
        .await;
    assert!(matches!(refused, Err(StoreError::Conflict)), "{refused:?}");
    assert_eq!(store.user(&same_person.id).await.unwrap(), None);
    let listed = store.users_of(&"cus_emails".into(), None, 10).await.unwrap();
    assert_eq!(listed, [first]);
    let elsewhere = User {
        customer_id: "cus_emails_other".into(),
        ..same_person
    };
    store.commit(changes(vec![Write::InsertUser(elsewhere)])).await.unwrap();
}

/// A customer's users are listed newest first, a page at a time, another customer's apart; a
/// user changed in place is listed once, as they now stand; a user is made once, and only a
/// stored one changes.
pub(super) async fn users_are_listed_by_customer_and_changed_in_place(store: &dyn Store) {
    let writes = vec![
        Write::InsertUser(user("usr_01a", "cus_users")),
        Write::InsertUser(user("usr_01b", "cus_users")),
        Write::InsertUser(user("usr_01c", "cus_users_other")),
    ];
    store.commit(changes(writes)).await.unwrap();
    let mut deactivated = user("usr_01a", "cus_users");
    deactivated.status = UserStatus::Deactivated;
    deactivated.version = 2;
    store
        .commit(changes(vec![Write::UpdateUser(deactivated.clone())]))
        .await
        .unwrap();
    // A change made from the user as they were before that one is refused: it would bring
    // them back.
    let mut stale = user("usr_01a", "cus_users");
    stale.roles = vec![Role::Maker, Role::Viewer];
    stale.version = 2;
    assert!(matches!(
        store.commit(changes(vec![Write::UpdateUser(stale)])).await,
        Err(StoreError::Conflict)
    ));
    deactivated.roles = vec![Role::Maker, Role::Viewer];
    deactivated.version = 3;
    store
        .commit(changes(vec![Write::UpdateUser(deactivated.clone())]))
        .await
        .unwrap();
    let listed = store.users_of(&"cus_users".into(), None, 10).await.unwrap();
    assert_eq!(listed, [user("usr_01b", "cus_users"), deactivated.clone()]);
    let first = store.users_of(&"cus_users".into(), None, 1).await.unwrap();
    assert_eq!(first, [user("usr_01b", "cus_users")]);
    let next = store
        .users_of(&"cus_users".into(), Some(&first[0].id), 10)
        .await
        .unwrap();
    assert_eq!(next, [deactivated.clone()]);
    assert_eq!(store.user(&"usr_01a".into()).await.unwrap(), Some(deactivated));
    let others = store.users_of(&"cus_users_other".into(), None, 10).await.unwrap();
    assert_eq!(others, [user("usr_01c", "cus_users_other")]);
    assert_eq!(store.users_of(&"cus_users_none".into(), None, 10).await.unwrap(), []);
    assert!(matches!(
        store
            .commit(changes(vec![Write::InsertUser(user("usr_01b", "cus_users"))]))
            .await,
        Err(StoreError::Conflict)
    ));
    assert!(matches!(
        store
            .commit(changes(vec![Write::UpdateUser(User {
                version: 2,
                ..user("usr_01z", "cus_users")
            })]))
            .await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(store.user(&"usr_01z".into()).await.unwrap(), None);
}

/// A customer's keys are listed newest first, a page at a time, the platform's apart, and a key
/// changed in place (rotated, revoked) is listed once, as it now stands.
pub(super) async fn api_keys_are_listed_by_owner(store: &dyn Store) {
    let writes = vec![
        Write::PutApiKey(api_key("key_01a", Some("cus_keys"))),
        Write::PutApiKey(api_key("key_01b", Some("cus_keys"))),
        Write::PutApiKey(api_key("key_01c", Some("cus_other"))),
        Write::PutApiKey(api_key("key_01d", None)),
    ];
    store.commit(changes(writes)).await.unwrap();
    let mut rotated = api_key("key_01a", Some("cus_keys"));
    rotated.rotated_to = Some("key_01b".into());
    rotated.version = 2;
    store
        .commit(changes(vec![Write::PutApiKey(rotated.clone())]))
        .await
        .unwrap();
    // A change made from the key as it was before that one (a second rotation, a revocation
    // that read it first) is refused, as is a new key under a taken id.
    let mut raced = api_key("key_01a", Some("cus_keys"));
    raced.rotated_to = Some("key_01c".into());
    raced.version = 2;
    for stale in [raced, api_key("key_01a", Some("cus_keys"))] {
        assert!(matches!(
            store.commit(changes(vec![Write::PutApiKey(stale)])).await,
            Err(StoreError::Conflict)
        ));
    }
    assert_eq!(store.api_key(&"key_01a".into()).await.unwrap(), Some(rotated));
    let ids = |keys: Vec<ApiKey>| keys.into_iter().map(|k| k.id).collect::<Vec<_>>();
    let customer = Some(&"cus_keys".into());
    let listed = store.api_keys_of(customer, None, 10).await.unwrap();
    assert_eq!(listed[1].rotated_to.as_deref(), Some("key_01b"));
    assert_eq!(ids(listed), ["key_01b", "key_01a"]);
    assert_eq!(ids(store.api_keys_of(customer, None, 1).await.unwrap()), ["key_01b"]);
    let next = store.api_keys_of(customer, Some(&"key_01b".into()), 10).await.unwrap();
    assert_eq!(ids(next), ["key_01a"]);
    assert_eq!(ids(store.api_keys_of(None, None, 10).await.unwrap()), ["key_01d"]);
    assert_eq!(
        ids(store.api_keys_of(Some(&"cus_none".into()), None, 10).await.unwrap()),
        Vec::<String>::new()
    );
    let found = store.api_key_by_hash("hash-of-key_01a").await.unwrap().unwrap();
    assert_eq!(
        (found.secret_hash.as_str(), found.created_by.as_deref()),
        ("hash-of-key_01a", Some("key_minter"))
    );
    // A secret's hash stands for one key: another key under it is refused, nothing written.
    let mut impostor = api_key("key_01e", Some("cus_keys"));
    impostor.secret_hash = "hash-of-key_01a".into();
    assert!(matches!(
        store.commit(changes(vec![Write::PutApiKey(impostor)])).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        store.api_key_by_hash("hash-of-key_01a").await.unwrap().unwrap().id,
        "key_01a"
    );
    assert_eq!(store.api_key(&"key_01e".into()).await.unwrap(), None);
}

/// A key's document as stored before keys had versions (`key_legacy`, its hash `hash-legacy`).
pub const LEGACY_API_KEY: &str = r#"{"id":"key_legacy","customer_id":"cus_legacy","user_id":null,"environment":"test","scopes":["operations:read"],"created_at":"2025-01-01T00:00:00Z","expires_at":null,"revoked_at":null,"secret_hash":"hash-legacy"}"#;

/// A user's document as stored before users had versions (`usr_legacy`).
pub const LEGACY_USER: &str = r#"{"id":"usr_legacy","customer_id":"cus_legacy","name":"Old","email":"old@example.com","roles":["approver"],"status":"active","created_at":"2025-01-01T00:00:00Z"}"#;

/// The key [`LEGACY_API_KEY`] and the user [`LEGACY_USER`], stored as they were, read as version
/// 1: a first change is taken and a second made from the same read (a rotation racing a
/// revocation, two admins' changes) is a conflict.
pub async fn legacy_keys_and_users_change_from_version_one(store: &dyn Store) {
    let stored = store.user(&"usr_legacy".into()).await.unwrap().unwrap();
    assert_eq!(stored.version, 1);
    let deactivated = User {
        status: UserStatus::Deactivated,
        version: 2,
        ..stored.clone()
    };
    let promoted = User {
        roles: vec![Role::Admin],
        version: 2,
        ..stored
    };
    store
        .commit(changes(vec![Write::UpdateUser(deactivated.clone())]))
        .await
        .unwrap();
    assert!(matches!(
        store.commit(changes(vec![Write::UpdateUser(promoted)])).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(store.user(&"usr_legacy".into()).await.unwrap(), Some(deactivated));

    let stored = store.api_key(&"key_legacy".into()).await.unwrap().unwrap();
    assert_eq!(stored.version, 1);
    let revoked = ApiKey {
        revoked_at: Some(OffsetDateTime::UNIX_EPOCH),
        version: 2,
        ..stored.clone()
    };
    let rotated = ApiKey {
        rotated_to: Some("key_successor".into()),
        version: 2,
        ..stored
    };
    store
        .commit(changes(vec![Write::PutApiKey(revoked.clone())]))
        .await
        .unwrap();
    assert!(matches!(
        store.commit(changes(vec![Write::PutApiKey(rotated)])).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(store.api_key(&"key_legacy".into()).await.unwrap(), Some(revoked));
}
