//! The rate limiter port's behaviour: each implementation's tests call [`run_all`].

use ops_domain::ids::{IdGenerator, IdKind, UlidGenerator};
use ops_domain::ports::RateLimiter;

pub async fn run_all(limiter: &dyn RateLimiter) {
    let ids = UlidGenerator::default();
    let (key, other_key) = (ids.new_id(IdKind::ApiKey), ids.new_id(IdKind::ApiKey));
    let window = 1_795_000_000;

    for n in 1..=3 {
        assert!(
            limiter.admit(&key, window, 3).await.unwrap(),
            "request {n} of 3 is admitted"
        );
    }
    assert!(
        !limiter.admit(&key, window, 3).await.unwrap(),
        "a fourth request in the same second is refused"
    );
    assert!(
        !limiter.admit(&key, window, 3).await.unwrap(),
        "a refused request is not counted as room"
    );
    assert!(
        limiter.admit(&other_key, window, 3).await.unwrap(),
        "another key has its own count"
    );
    assert!(
        limiter.admit(&key, window + 1, 3).await.unwrap(),
        "the next second starts a new count"
    );

    // Requests racing for the last places: exactly the limit gets in.
    let racing = ids.new_id(IdKind::ApiKey);
    let answers = futures_util::future::join_all((0..12).map(|_| limiter.admit(&racing, window, 5))).await;
    let admitted = answers.into_iter().filter(|answer| *answer.as_ref().unwrap()).count();
    assert_eq!(admitted, 5, "twelve concurrent requests under a limit of five");
}
