use super::*;
use serde_json::json;

fn rails(rail: &str) -> bool {
    rail == "psp-local:sandbox"
}

fn param_of(body: serde_json::Value) -> String {
    let command: CreateOperation = serde_json::from_value(body).unwrap();
    match command.validate(&rails).unwrap_err() {
        DomainError::InvalidRequest { param, .. } => param.unwrap(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_time_is_kept_in_utc_whatever_its_offset_and_one_rfc_3339_cannot_write_is_refused() {
    let utc = |text: &str| {
        rfc3339_time(text, "at").map(|at| at.format(&time::format_description::well_known::Rfc3339).unwrap())
    };
    assert_eq!(utc("2030-01-01T09:00:00-03:00").unwrap(), "2030-01-01T12:00:00Z");
    assert_eq!(utc("2030-01-01T00:30:00+01:00").unwrap(), "2029-12-31T23:30:00Z");
    assert_eq!(utc("9999-12-31T23:59:59Z").unwrap(), "9999-12-31T23:59:59Z");
    for text in ["9999-12-31T23:00:00-05:00", "0000-01-01T00:00:00+00:01", "tomorrow"] {
        match rfc3339_time(text, "at") {
            Err(DomainError::InvalidRequest { param, code, .. }) => {
                assert_eq!((param.as_deref(), code), (Some("at"), "invalid_time"), "{text}")
            }
            other => panic!("{text}: {other:?}"),
        }
    }
}

fn valid() -> serde_json::Value {
    json!({"customer_id": "cus_1", "type": "payout", "currency": "CLP", "workflow": "auto",
           "items": [{"beneficiary": {"id_type": "RUT", "id": "1-9"},
                      "destination": {"rail": "psp-local:sandbox", "account": "123"},
                      "amount": 1000, "reference": "r"}]})
}

fn with(path: &[&str], value: serde_json::Value) -> serde_json::Value {
    let mut body = valid();
    let mut at = &mut body;
    for (i, key) in path.iter().enumerate() {
        let next = if let Ok(index) = key.parse::<usize>() {
            &mut at[index]
        } else {
            &mut at[*key]
        };
        if i == path.len() - 1 {
            *next = value.clone();
            break;
        }
        at = next;
    }
    body
}

#[test]
fn a_valid_operation_passes() {
    let command: CreateOperation = serde_json::from_value(valid()).unwrap();
    let op = command.validate(&rails).unwrap();
    assert_eq!(op.items[0].amount.minor_units(), 1000);
}

#[test]
fn each_bad_field_is_named() {
    let cases = [
        (with(&["type"], json!("refund")), "type"),
        (with(&["currency"], json!("clp")), "currency"),
        (with(&["currency"], json!("")), "currency"),
        (with(&["workflow"], json!("Two Step")), "workflow"),
        (with(&["items"], json!([])), "items"),
        (with(&["items", "0", "amount"], json!(0)), "items[0].amount"),
        (with(&["items", "0", "amount"], json!(-1)), "items[0].amount"),
        (
            with(&["items", "0", "amount"], json!(MAX_ITEM_AMOUNT + 1)),
            "items[0].amount",
        ),
        (
            with(&["items", "0", "destination", "rail"], json!("swift")),
            "items[0].destination.rail",
        ),
        (
            with(&["items", "0", "destination", "rail"], json!("psp-local:mars")),
            "items[0].destination.rail",
        ),
        (
            with(&["items", "0", "destination", "account"], json!("")),
            "items[0].destination.account",
        ),
        (
            with(&["items", "0", "beneficiary", "id_type"], json!("R U T")),
            "items[0].beneficiary.id_type",
        ),
        (
            with(&["items", "0", "reference"], json!("x".repeat(141))),
            "items[0].reference",
        ),
        (with(&["metadata"], json!({"k": "v".repeat(501)})), "metadata[k]"),
        (with(&["metadata"], json!({"": "v"})), "metadata"),
        (with(&["metadata"], json!({"k".repeat(41): "v"})), "metadata"),
        (with(&["metadata"], json!({"a\u{202E}b": "v"})), "metadata"),
    ];
    for (body, param) in cases {
        assert_eq!(param_of(body.clone()), param, "{body}");
    }
    let mut no_currency = valid();
    no_currency.as_object_mut().unwrap().remove("currency");
    assert_eq!(param_of(no_currency), "currency");
}

#[test]
fn emails_and_roles_are_checked() {
    let user = |email: &str, roles: serde_json::Value| -> Result<_, DomainError> {
        serde_json::from_value::<CreateUser>(json!({"name": "Ana", "email": email, "roles": roles}))
            .unwrap()
            .validate()
    };
    assert!(user("ana@example.com", json!(["maker"])).is_ok());
    assert!(user("ana.example.com", json!(["maker"])).is_err());
    assert!(user("ana@example.com", json!([])).is_err());
    assert_eq!(
        user("ana@example.com", json!(["maker", "maker"])).unwrap().2,
        vec![Role::Maker]
    );
}
