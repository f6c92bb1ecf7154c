//! The secrets port's behaviour: each implementation's tests call [`run_all`] with a fresh one.

use ops_domain::ports::Secrets;

pub async fn run_all(secrets: &dyn Secrets) {
    assert_eq!(
        secrets.secret("never-stored").await.unwrap(),
        None,
        "a missing secret is None, not an error"
    );

    secrets.put_secret("webhook/whe_1", "whsec_first").await.unwrap();
    assert_eq!(
        secrets.secret("webhook/whe_1").await.unwrap().as_deref(),
        Some("whsec_first")
    );

    // Rotation writes a new value under the same name: it is read back at once.
    secrets.put_secret("webhook/whe_1", "whsec_second").await.unwrap();
    assert_eq!(
        secrets.secret("webhook/whe_1").await.unwrap().as_deref(),
        Some("whsec_second")
    );

    secrets.put_secret("webhook/whe_2", "whsec_other").await.unwrap();
    assert_eq!(
        secrets.secret("webhook/whe_1").await.unwrap().as_deref(),
        Some("whsec_second"),
        "names do not share values"
    );

    secrets.delete_secret("webhook/whe_1").await.unwrap();
    assert_eq!(
        secrets.secret("webhook/whe_1").await.unwrap(),
        None,
        "a deleted secret is gone"
    );
    assert_eq!(
        secrets.secret("webhook/whe_2").await.unwrap().as_deref(),
        Some("whsec_other"),
        "deleting one keeps the others"
    );
    secrets.delete_secret("webhook/whe_1").await.unwrap();
    secrets.delete_secret("never-stored").await.unwrap();

    // Listed by prefix, names only, each with when it was first stored (a new value keeps it).
    let before = time::OffsetDateTime::now_utc() - time::Duration::minutes(1);
    secrets.put_secret("webhook/whe_3/a", "whsec_a").await.unwrap();
    secrets.put_secret("webhook/whe_3/b", "whsec_b").await.unwrap();
    secrets.put_secret("webhook/whe_30/c", "whsec_c").await.unwrap();
    secrets.put_secret("other/whe_3/d", "whsec_d").await.unwrap();
    secrets.put_secret("webhook/whe_3/a", "whsec_a2").await.unwrap();
    let mut listed = secrets.secrets_named("webhook/whe_3/").await.unwrap();
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    let names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["webhook/whe_3/a", "webhook/whe_3/b"]);
    let after = time::OffsetDateTime::now_utc() + time::Duration::minutes(1);
    assert!(
        listed.iter().all(|s| (before..after).contains(&s.stored_at)),
        "{listed:?}"
    );
    let all: Vec<String> = secrets
        .secrets_named("webhook/")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert!(
        all.len() == 4 && all.iter().all(|name| name.starts_with("webhook/")),
        "{all:?}"
    );
    assert_eq!(secrets.secrets_named("WEBHOOK/").await.unwrap(), vec![]);
}
