//! The rate limiter port's behaviour: each implementation's tests call [`run_all`].

use ops_domain::ids::{IdGenerator, IdKind, UlidGenerator};
use ops_domain::ports::{Limits, RateLimiter};

pub async fn run_all(limiter: &dyn RateLimiter) {
    let ids = UlidGenerator::default();
    let customer = ids.new_id(IdKind::Customer);
    let (key, other_key) = (ids.new_id(IdKind::ApiKey), ids.new_id(IdKind::ApiKey));
    let window = 1_795_000_000;
    let limits = Limits { member: 3, group: 5 };

    for n in 1..=3 {
        assert!(
            limiter.admit(&customer, &key, window, limits).await.unwrap(),
            "request {n} of 3 is admitted"
        );
    }
    assert!(
        !limiter.admit(&customer, &key, window, limits).await.unwrap(),
        "a fourth request of the key in the same second is refused"
    );
    assert!(
        !limiter.admit(&customer, &key, window, limits).await.unwrap(),
        "a refused request is not counted as room"
    );
    assert!(
        limiter.admit(&customer, &other_key, window, limits).await.unwrap(),
        "another key has its own count"
    );
    assert!(
        limiter.admit(&customer, &other_key, window, limits).await.unwrap(),
        "the customer's fifth request"
    );
    let third_key = ids.new_id(IdKind::ApiKey);
    assert!(
        !limiter.admit(&customer, &third_key, window, limits).await.unwrap(),
        "the customer's keys together are held to the customer's limit"
    );
    assert!(
        limiter
            .admit(&ids.new_id(IdKind::Customer), &third_key, window, limits)
            .await
            .unwrap(),
        "another customer has its own count"
    );
    assert!(
        limiter.admit(&customer, &key, window + 1, limits).await.unwrap(),
        "the next second starts a new count"
    );

    // Requests racing for the last places: exactly the limit gets in, whether the key's or
    // the customer's is the one that binds.
    for (limits, admitted) in [
        (Limits { member: 5, group: 100 }, 5),
        (Limits { member: 100, group: 4 }, 4),
    ] {
        let racing = ids.new_id(IdKind::Customer);
        let answers =
            futures_util::future::join_all((0..12).map(|_| limiter.admit(&racing, &key, window, limits))).await;
        let counted = answers.into_iter().filter(|answer| *answer.as_ref().unwrap()).count();
        assert_eq!(counted, admitted, "twelve concurrent requests under {limits:?}");
    }
}
