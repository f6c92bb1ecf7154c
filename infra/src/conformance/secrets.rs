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
}
