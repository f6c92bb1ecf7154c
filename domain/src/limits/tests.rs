use super::*;
use time::macros::datetime;

fn clp() -> Currency {
    Currency::try_from("CLP".to_string()).unwrap()
}

fn limit() -> PayoutLimit {
    PayoutLimit {
        currency: clp(),
        daily: Some(1_000),
        monthly: Some(10_000),
        per_operation: Some(600),
        per_beneficiary_daily_count: Some(2),
        over_limit: OverLimit::Refuse,
    }
}

fn facts<'a>(customer: &'a CustomerId, currency: &'a Currency, total: i64, beneficiaries: &[&str]) -> PayoutFacts<'a> {
    PayoutFacts {
        customer_id: customer,
        currency,
        total_amount: total,
        payees: beneficiaries
            .iter()
            .map(|b| (b.to_string(), "sbx:1".to_string()))
            .collect(),
        at: datetime!(2026-12-07 23:59:59 -03:00),
    }
}

#[test]
fn counters_are_kept_by_utc_day_and_month() {
    let customer = CustomerId::from("cus_1");
    let currency = clp();
    let counters = Counters::at(&customer, &currency, datetime!(2026-12-31 22:00 -03:00));
    assert_eq!(counters.daily(), "cus_1:CLP:d2027-01-01");
    assert_eq!(counters.monthly(), "cus_1:CLP:m2027-01");
    assert_eq!(counters.beneficiary("rut:1-9"), "cus_1:CLP:d2027-01-01:b:rut:1-9");
}

#[test]
fn a_payout_within_its_limits_counts_what_it_adds_from_what_was_read() {
    let (customer, currency) = (CustomerId::from("cus_1"), clp());
    let payout = facts(&customer, &currency, 300, &["rut:1", "rut:1", "rut:2"]);
    let used = BTreeMap::from([("cus_1:CLP:d2026-12-08".to_string(), 100)]);
    let check = LimitCheck::of(&limit(), &payout, &used);
    assert!(check.within(), "{:?}", check.breaches);
    assert_eq!(
        check.uses,
        vec![
            LimitUse {
                key: "cus_1:CLP:d2026-12-08".into(),
                before: 100,
                after: 400
            },
            LimitUse {
                key: "cus_1:CLP:m2026-12".into(),
                before: 0,
                after: 300
            },
            LimitUse {
                key: "cus_1:CLP:d2026-12-08:b:rut:1".into(),
                before: 0,
                after: 2
            },
            LimitUse {
                key: "cus_1:CLP:d2026-12-08:b:rut:2".into(),
                before: 0,
                after: 1
            },
        ]
    );
}

#[test]
fn each_limit_passed_is_a_breach_and_exactly_reaching_one_is_not() {
    let (customer, currency) = (CustomerId::from("cus_1"), clp());
    let used = BTreeMap::from([
        ("cus_1:CLP:d2026-12-08".to_string(), 400),
        ("cus_1:CLP:d2026-12-08:b:rut:1".to_string(), 1),
    ]);
    let exactly = LimitCheck::of(&limit(), &facts(&customer, &currency, 600, &["rut:1"]), &used);
    assert!(exactly.within(), "{:?}", exactly.breaches);
    let over = LimitCheck::of(&limit(), &facts(&customer, &currency, 601, &["rut:1", "rut:1"]), &used);
    let kinds: Vec<LimitKind> = over.breaches.iter().map(|b| b.limit).collect();
    assert_eq!(
        kinds,
        [
            LimitKind::PerOperation,
            LimitKind::Daily,
            LimitKind::PerBeneficiaryDailyCount
        ]
    );
    let (_, first, reason) = over.verdict().unwrap();
    assert_eq!(first, LimitKind::PerOperation);
    assert!(
        reason.starts_with("601 CLP is over the per-operation limit of 600; "),
        "{reason}"
    );
    assert_eq!(
        over.breaches[1].message(&currency),
        "601 CLP more, after 400 approved, passes the daily limit of 1000"
    );
}

#[test]
fn a_warning_is_raised_once_for_each_share_a_payout_reaches() {
    let (customer, currency) = (CustomerId::from("cus_1"), clp());
    let used = BTreeMap::from([("cus_1:CLP:d2026-12-08".to_string(), 499)]);
    let check = LimitCheck::of(&limit(), &facts(&customer, &currency, 301, &[]), &used);
    let daily: Vec<u8> = check
        .warnings
        .iter()
        .filter(|w| w.limit == LimitKind::Daily)
        .map(|w| w.percent)
        .collect();
    assert_eq!(daily, [50, 80]);
    let from_80 = BTreeMap::from([("cus_1:CLP:d2026-12-08".to_string(), 800)]);
    let check = LimitCheck::of(&limit(), &facts(&customer, &currency, 200, &[]), &from_80);
    let daily: Vec<u8> = check.warnings.iter().map(|w| w.percent).collect();
    assert_eq!(daily, [100], "80 % was passed before, the month stays under 50 %");
}

#[test]
fn limits_as_set_are_refused_with_the_field_that_is_wrong() {
    let mut twice = vec![limit(), limit()];
    let param = |result: Result<(), DomainError>| match result.unwrap_err() {
        DomainError::InvalidRequest { param, code, .. } => (param.unwrap(), code),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        param(validate(&twice, None)),
        ("limits[1].currency".into(), "duplicate_currency")
    );
    twice.pop();
    twice[0].daily = Some(0);
    assert_eq!(
        param(validate(&twice, None)),
        ("limits[0].daily".into(), "out_of_range")
    );
    let empty = PayoutLimit {
        daily: None,
        monthly: None,
        per_operation: None,
        per_beneficiary_daily_count: None,
        ..limit()
    };
    assert_eq!(param(validate(&[empty], None)), ("limits[0]".into(), "no_limit"));
    let to_maker = PayoutLimit {
        over_limit: OverLimit::Escalate { role: Role::Maker },
        ..limit()
    };
    assert_eq!(
        param(validate(&[to_maker], None)),
        ("limits[0].over_limit.role".into(), "role_cannot_approve")
    );
    let review = PayeeReview {
        new_payee: true,
        changed_account: true,
        role: Role::Viewer,
    };
    assert_eq!(
        param(validate(&[limit()], Some(&review))),
        ("payee_review.role".into(), "role_cannot_approve")
    );
    assert!(validate(&[limit()], None).is_ok());
}
