//! The rate limiter port's behaviour: each implementation's tests call [`run_all`].

use ops_domain::ids::{IdGenerator, IdKind, UlidGenerator};
use ops_domain::ports::{Admission, Limits, RateLimiter};

pub async fn run_all(limiter: &dyn RateLimiter) {
    let ids = UlidGenerator::default();
    let customer = ids.new_id(IdKind::Customer);
    let (key, other_key) = (ids.new_id(IdKind::ApiKey), ids.new_id(IdKind::ApiKey));
    let window = 1_795_000_000;
    let limits = Limits { member: 3, group: 5 };
    let admit = |group: String, member: String, window: i64| async move {
        limiter.admit(&group, &member, window, limits).await.unwrap()
    };
    let room = |remaining: u32| Admission {
        admitted: true,
        remaining,
    };

    for remaining in [2, 1, 0] {
        assert_eq!(
            admit(customer.clone(), key.clone(), window).await,
            room(remaining),
            "the key's room shrinks by one a request"
        );
    }
    assert_eq!(
        admit(customer.clone(), key.clone(), window).await,
        Admission::REFUSED,
        "a fourth request of the key in the same second is refused"
    );
    assert_eq!(
        admit(customer.clone(), key.clone(), window).await,
        Admission::REFUSED,
        "a refused request is not counted as room"
    );
    assert_eq!(
        admit(customer.clone(), other_key.clone(), window).await,
        room(1),
        "another key has its own count, and its room is the customer's when that is tighter"
    );
    assert_eq!(
        admit(customer.clone(), other_key.clone(), window).await,
        room(0),
        "the customer's fifth request"
    );
    let third_key = ids.new_id(IdKind::ApiKey);
    assert_eq!(
        admit(customer.clone(), third_key.clone(), window).await,
        Admission::REFUSED,
        "the customer's keys together are held to the customer's limit"
    );
    assert_eq!(
        admit(ids.new_id(IdKind::Customer), third_key, window).await,
        room(2),
        "another customer has its own count"
    );
    assert_eq!(
        admit(customer.clone(), key.clone(), window + 1).await,
        room(2),
        "the next second starts a new count"
    );

    // Requests racing for the last places: exactly the limit gets in, whether the key's or
    // the customer's is the one that binds, and each is told a different room.
    for (limits, admitted) in [
        (Limits { member: 5, group: 100 }, 5),
        (Limits { member: 100, group: 4 }, 4),
    ] {
        let racing = ids.new_id(IdKind::Customer);
        let answers =
            futures_util::future::join_all((0..12).map(|_| limiter.admit(&racing, &key, window, limits))).await;
        let mut rooms: Vec<u32> = answers
            .into_iter()
            .map(Result::unwrap)
            .filter(|answer| answer.admitted)
            .map(|answer| answer.remaining)
            .collect();
        rooms.sort_unstable();
        let expected: Vec<u32> = (0..admitted).collect();
        assert_eq!(rooms, expected, "twelve concurrent requests under {limits:?}");
    }
}
