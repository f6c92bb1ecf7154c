//! A rail's reconciliation rules, set by the platform: which ways of matching are tried and in
//! which order, how far an amount may differ and still match, how many days a booking may be
//! from its confirmation, and whether several transactions may add up to one line.

use super::MatchedBy;
use crate::access::{require_platform_admin, Environment, Principal};
use crate::cause::Cause;
use crate::error::DomainError;
use crate::ports::{AuditEntry, Changeset, Write};
use serde::{Deserialize, Serialize};

/// The widest amount tolerance a rail may have, in per cent (5 %, as basis points)…
pub const MAX_TOLERANCE_BASIS_POINTS: u32 = 500;
/// …and in minor units (1,000.00 of a two-decimal currency).
pub const MAX_TOLERANCE_MINOR_UNITS: i64 = 100_000;
/// The widest date window, in days either side of a confirmation.
pub const MAX_DATE_WINDOW_DAYS: u8 = 10;
/// The most transactions one line may be matched to as a group.
pub const MAX_GROUP_TRANSACTIONS: u8 = 5;

/// How far a line's amount may be from its transaction's and still match (`matched_with_difference`):
/// the larger of `minor_units` and `basis_points` of the line's amount, so the minor units are a
/// floor under the percentage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    #[serde(default)]
    pub minor_units: i64,
    #[serde(default)]
    pub basis_points: u32,
}

impl Tolerance {
    /// The difference allowed on a line of `amount` minor units.
    pub fn allowed(self, amount: i64) -> i64 {
        let share = (i128::from(amount.abs()) * i128::from(self.basis_points) / 10_000) as i64;
        self.minor_units.max(share)
    }
}

/// Several transactions summing to one line (a rail that nets a day's payouts into one
/// booking): tried for a confirmed line nothing else matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManyToOne {
    /// At most [`MAX_GROUP_TRANSACTIONS`]; at least 2.
    pub max_transactions: u8,
}

/// What decides how a rail's statements match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchingRules {
    /// The ways tried, in order; a way left out is not tried.
    pub match_order: Vec<MatchedBy>,
    pub tolerance: Tolerance,
    /// How far a line's booking day may be from its transaction's confirmation for a match by
    /// value (and for a group's members).
    pub date_window_days: u8,
    pub many_to_one: Option<ManyToOne>,
    /// A `matched_with_difference` line whose difference is above this (minor units) opens an
    /// exceptions item; at or below, it is only shown.
    pub difference_work_item_above: i64,
}

impl Default for MatchingRules {
    /// Every way, exact amounts, two days, no groups: how statements matched before rules.
    fn default() -> MatchingRules {
        MatchingRules {
            match_order: vec![
                MatchedBy::RailReference,
                MatchedBy::TransactionId,
                MatchedBy::AmountAndDate,
            ],
            tolerance: Tolerance::default(),
            date_window_days: 2,
            many_to_one: None,
            difference_work_item_above: 0,
        }
    }
}

/// A rail's rules as the platform saved them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReconciliationRules {
    pub rail: String,
    pub environment: Environment,
    #[serde(flatten)]
    pub rules: MatchingRules,
    /// 0 while the rail has the defaults (never saved).
    pub version: u64,
    /// Who saved this version, when and why.
    pub cause: Option<Cause>,
}

impl ReconciliationRules {
    pub fn defaults(rail: &str, environment: Environment) -> ReconciliationRules {
        ReconciliationRules {
            rail: rail.to_owned(),
            environment,
            rules: MatchingRules::default(),
            version: 0,
            cause: None,
        }
    }

    /// The entity its audit entries are filed under.
    pub fn entity(rail: &str) -> String {
        format!("reconciliation_rules:{rail}")
    }
}

/// `PUT /v1/reconciliation_rules/{rail}`: every field optional, an absent one its default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutMatchingRules {
    pub match_order: Option<Vec<String>>,
    pub tolerance: Option<Tolerance>,
    pub date_window_days: Option<i64>,
    pub many_to_one: Option<ManyToOne>,
    pub difference_work_item_above: Option<i64>,
}

impl PutMatchingRules {
    /// The rules it sets, each field checked against its bounds and named when refused.
    pub fn checked(self) -> Result<MatchingRules, DomainError> {
        let defaults = MatchingRules::default();
        let match_order = match self.match_order {
            None => defaults.match_order,
            Some(names) => {
                let mut order = Vec::with_capacity(names.len());
                for (i, name) in names.iter().enumerate() {
                    let field = format!("match_order[{i}]");
                    let way = MatchedBy::parse(name).filter(|way| *way != MatchedBy::Group).ok_or_else(|| {
                        DomainError::invalid(
                            &field,
                            "invalid_match_way",
                            format!("'{name}' is not a way of matching: rail_reference, transaction_id or amount_and_date."),
                        )
                    })?;
                    if order.contains(&way) {
                        return Err(DomainError::invalid(
                            &field,
                            "duplicate_match_way",
                            format!("'{name}' is listed twice."),
                        ));
                    }
                    order.push(way);
                }
                if order.is_empty() {
                    return Err(DomainError::invalid(
                        "match_order",
                        "empty_match_order",
                        "match_order lists at least one way of matching.",
                    ));
                }
                order
            }
        };
        let tolerance = self.tolerance.unwrap_or_default();
        if !(0..=MAX_TOLERANCE_MINOR_UNITS).contains(&tolerance.minor_units) {
            return Err(DomainError::invalid(
                "tolerance.minor_units",
                "tolerance_out_of_range",
                format!("tolerance.minor_units is from 0 to {MAX_TOLERANCE_MINOR_UNITS}."),
            ));
        }
        if tolerance.basis_points > MAX_TOLERANCE_BASIS_POINTS {
            return Err(DomainError::invalid(
                "tolerance.basis_points",
                "tolerance_out_of_range",
                format!("tolerance.basis_points is from 0 to {MAX_TOLERANCE_BASIS_POINTS} (5 %)."),
            ));
        }
        let date_window_days = match self.date_window_days {
            None => defaults.date_window_days,
            Some(days) if (0..=i64::from(MAX_DATE_WINDOW_DAYS)).contains(&days) => days as u8,
            Some(_) => {
                return Err(DomainError::invalid(
                    "date_window_days",
                    "date_window_out_of_range",
                    format!("date_window_days is from 0 to {MAX_DATE_WINDOW_DAYS}."),
                ))
            }
        };
        if let Some(group) = self.many_to_one {
            if !(2..=MAX_GROUP_TRANSACTIONS).contains(&group.max_transactions) {
                return Err(DomainError::invalid(
                    "many_to_one.max_transactions",
                    "group_size_out_of_range",
                    format!("many_to_one.max_transactions is from 2 to {MAX_GROUP_TRANSACTIONS}."),
                ));
            }
        }
        let difference_work_item_above = self.difference_work_item_above.unwrap_or(0);
        if difference_work_item_above < 0 {
            return Err(DomainError::invalid(
                "difference_work_item_above",
                "negative_threshold",
                "difference_work_item_above is 0 or more minor units.",
            ));
        }
        Ok(MatchingRules {
            match_order,
            tolerance,
            date_window_days,
            many_to_one: self.many_to_one,
            difference_work_item_above,
        })
    }
}

impl crate::service::Service {
    /// The rules `rail`'s statements are matched by here: the platform's, else the defaults.
    pub(super) async fn rules_of(&self, rail: &str) -> Result<ReconciliationRules, DomainError> {
        Ok(self
            .store
            .reconciliation_rules(rail, self.environment)
            .await?
            .unwrap_or_else(|| ReconciliationRules::defaults(rail, self.environment)))
    }

    fn served_rail(&self, rail: &str) -> Result<(), DomainError> {
        if self.rails.contains(rail) {
            return Ok(());
        }
        Err(DomainError::not_found("rail", rail))
    }

    pub async fn get_reconciliation_rules(
        &self,
        principal: &Principal,
        rail: &str,
    ) -> Result<ReconciliationRules, DomainError> {
        require_platform_admin(principal)?;
        self.served_rail(rail)?;
        self.rules_of(rail).await
    }

    /// Saves a rail's rules as a new version, audited with what they say; statements imported
    /// from then on are matched by them (a reconciliation names the version it used).
    pub async fn put_reconciliation_rules(
        &self,
        principal: &Principal,
        rail: &str,
        put: PutMatchingRules,
    ) -> Result<ReconciliationRules, DomainError> {
        require_platform_admin(principal)?;
        self.served_rail(rail)?;
        let rules = put.checked()?;
        let current = self.rules_of(rail).await?;
        let now = self.now();
        let version = current.version + 1;
        let cause = Cause::new(
            "reconciliation_rules_saved",
            format!("Reconciliation rules for {rail} saved as version {version}"),
            principal.actor(),
            now,
        );
        let saved = ReconciliationRules {
            rail: rail.to_owned(),
            environment: self.environment,
            rules,
            version,
            cause: Some(cause.clone()),
        };
        let mut details = serde_json::to_value(&saved.rules).unwrap_or_default();
        if let Some(fields) = details.as_object_mut() {
            fields.insert("version".into(), version.into());
        }
        let action = if current.version == 0 { "created" } else { "updated" };
        let mut changes = Changeset::default();
        changes.push(Write::Audit(
            AuditEntry::new(
                "reconciliation_rules",
                &ReconciliationRules::entity(rail),
                action,
                cause,
            )
            .with_details(details),
        ));
        changes.push(Write::PutReconciliationRules(saved.clone()));
        self.commit(changes).await?;
        Ok(saved)
    }

    /// Every saved version of a rail's rules, oldest first, each entry with what it saved.
    pub async fn reconciliation_rules_history(
        &self,
        principal: &Principal,
        rail: &str,
    ) -> Result<crate::service::Page<crate::ports::AuditEntry>, DomainError> {
        require_platform_admin(principal)?;
        self.served_rail(rail)?;
        let entity = ReconciliationRules::entity(rail);
        Ok(crate::service::Page::all(self.store.entity_history(&entity).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: serde_json::Value) -> String {
        let put: PutMatchingRules = serde_json::from_value(body).expect("a body");
        match put.checked() {
            Err(DomainError::InvalidRequest { param: Some(param), .. }) => param,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn each_bound_is_refused_naming_its_field() {
        use serde_json::json;
        assert_eq!(
            refused(json!({"match_order": ["rail_reference", "iban"]})),
            "match_order[1]"
        );
        assert_eq!(refused(json!({"match_order": ["group"]})), "match_order[0]");
        assert_eq!(
            refused(json!({"match_order": ["transaction_id", "transaction_id"]})),
            "match_order[1]"
        );
        assert_eq!(refused(json!({"match_order": []})), "match_order");
        assert_eq!(
            refused(json!({"tolerance": {"basis_points": 501}})),
            "tolerance.basis_points"
        );
        assert_eq!(
            refused(json!({"tolerance": {"minor_units": -1}})),
            "tolerance.minor_units"
        );
        assert_eq!(refused(json!({"date_window_days": 11})), "date_window_days");
        assert_eq!(
            refused(json!({"many_to_one": {"max_transactions": 6}})),
            "many_to_one.max_transactions"
        );
        assert_eq!(
            refused(json!({"difference_work_item_above": -5})),
            "difference_work_item_above"
        );
    }

    #[test]
    fn the_minor_units_are_a_floor_under_the_percentage() {
        let tolerance = Tolerance {
            minor_units: 50,
            basis_points: 100,
        };
        assert_eq!(tolerance.allowed(1_000), 50, "1 % of 1,000 is 10: the floor holds");
        assert_eq!(tolerance.allowed(100_000), 1_000, "1 % of 100,000");
        assert_eq!(Tolerance::default().allowed(1_000_000), 0);
    }

    mod matching {
        use super::super::super::matching::tests::{confirmed, line};
        use super::*;
        use crate::rail::{Period, StatementLine, StatementStatus};
        use crate::reconciliations::{match_statement, LineOutcome};
        use time::macros::{date, datetime};

        const PERIOD: Period = Period {
            from: date!(2026 - 11 - 24),
            to: date!(2026 - 11 - 24),
        };

        /// A line's outcome, how it matched, its difference and the transactions it matched.
        type Seen = (LineOutcome, Option<MatchedBy>, Option<i64>, Vec<String>);

        fn seen(
            lines: &[StatementLine],
            known: &[crate::transactions::Transaction],
            rules: &MatchingRules,
        ) -> Vec<Seen> {
            match_statement(lines, known, PERIOD, rules)
                .into_iter()
                .map(|l| {
                    let mut matched: Vec<String> = l.group.iter().map(ToString::to_string).collect();
                    matched.extend(l.transaction_id.map(|t| t.to_string()));
                    (l.outcome, l.matched_by, l.amount_difference, matched)
                })
                .collect()
        }

        /// A bank fee taken from a payout: within the tolerance the line matches with its
        /// difference shown; beyond it, it is a mismatch as before.
        #[test]
        fn an_amount_within_the_tolerance_matches_with_its_difference() {
            let day = datetime!(2026-11-24 10:00 UTC);
            let known = vec![
                confirmed("txn_a", "R-A", 100_000, day),
                confirmed("txn_b", "R-B", 100_000, day),
                confirmed("txn_c", "R-C", 50_000, day),
            ];
            let rules = MatchingRules {
                tolerance: Tolerance {
                    minor_units: 100,
                    basis_points: 50,
                },
                ..MatchingRules::default()
            };
            let lines = [
                line("R-A", None, 99_600, StatementStatus::Confirmed),
                line("R-B", None, 99_400, StatementStatus::Confirmed),
                line("X-1", None, 49_910, StatementStatus::Confirmed),
            ];
            use LineOutcome::*;
            assert_eq!(
                seen(&lines, &known, &rules),
                vec![
                    (
                        MatchedWithDifference,
                        Some(MatchedBy::RailReference),
                        Some(-400),
                        vec!["txn_a".into()]
                    ),
                    (
                        Mismatched,
                        Some(MatchedBy::RailReference),
                        Some(-600),
                        vec!["txn_b".into()]
                    ),
                    (
                        MatchedWithDifference,
                        Some(MatchedBy::AmountAndDate),
                        Some(-90),
                        vec!["txn_c".into()]
                    ),
                ]
            );
            let exact = seen(&lines, &known, &MatchingRules::default());
            assert_eq!(exact[0].0, Mismatched, "no tolerance by default");
            assert_eq!(exact[2].0, Unmatched);
        }

        #[test]
        fn the_match_order_and_the_date_window_are_the_rules() {
            let known = vec![
                confirmed("txn_a", "R-A", 100, datetime!(2026-11-24 10:00 UTC)),
                confirmed("txn_b", "R-B", 200, datetime!(2026-11-19 10:00 UTC)),
            ];
            // The line gives txn_a's reference and txn_b's id: the order decides.
            let both = [
                line("R-A", Some("txn_b"), 100, StatementStatus::Confirmed),
                line("X-1", None, 200, StatementStatus::Confirmed),
            ];
            let id_first = MatchingRules {
                match_order: vec![MatchedBy::TransactionId, MatchedBy::RailReference],
                ..MatchingRules::default()
            };
            let found = seen(&both, &known, &id_first);
            assert_eq!(found[0].1, Some(MatchedBy::TransactionId));
            assert_eq!(found[0].3, vec!["txn_b".to_owned()]);
            assert_eq!(
                found[1].0,
                LineOutcome::Unmatched,
                "not by value: left out of the order"
            );
            let wide = MatchingRules {
                date_window_days: 5,
                ..MatchingRules::default()
            };
            let found = seen(&both, &known, &wide);
            assert_eq!(found[0].1, Some(MatchedBy::RailReference));
            assert_eq!(
                (found[1].0, found[1].1),
                (LineOutcome::Matched, Some(MatchedBy::AmountAndDate)),
                "five days from its confirmation, inside a five-day window"
            );
            assert_eq!(
                seen(&both, &known, &MatchingRules::default())[1].0,
                LineOutcome::Unmatched
            );
        }

        /// A rail that books a day's payouts as one debit: the line matches the transactions
        /// that add up to it, each claimed once, and never more than the rules allow.
        #[test]
        fn several_transactions_add_up_to_one_line() {
            let day = datetime!(2026-11-24 10:00 UTC);
            let known = vec![
                confirmed("txn_a", "R-A", 300, day),
                confirmed("txn_b", "R-B", 500, day),
                confirmed("txn_c", "R-C", 700, day),
                confirmed("txn_d", "R-D", 1_100, day),
                confirmed("txn_e", "R-E", 50, day),
            ];
            let netted = |amount| StatementLine {
                rail_reference: None,
                ..line("", None, amount, StatementStatus::Confirmed)
            };
            let lines = [netted(1_400), netted(1_200), netted(9_999)];
            let rules = MatchingRules {
                many_to_one: Some(ManyToOne { max_transactions: 3 }),
                ..MatchingRules::default()
            };
            use LineOutcome::*;
            let group = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            assert_eq!(
                seen(&lines, &known, &rules),
                vec![
                    (Matched, Some(MatchedBy::Group), None, group(&["txn_d", "txn_a"])),
                    (Matched, Some(MatchedBy::Group), None, group(&["txn_c", "txn_b"])),
                    (Unmatched, None, None, vec![]),
                    (Missing, None, None, group(&["txn_e"])),
                ]
            );
            let pairs = MatchingRules {
                many_to_one: Some(ManyToOne { max_transactions: 2 }),
                ..MatchingRules::default()
            };
            let three = [netted(1_450)];
            assert_eq!(
                seen(&three, &known, &pairs)[0].0,
                Unmatched,
                "1,100 + 300 + 50 needs three"
            );
            assert_eq!(seen(&three, &known, &rules)[0].0, Matched);
            assert_eq!(
                seen(&lines, &known, &MatchingRules::default())[0].0,
                Unmatched,
                "off by default"
            );
        }
    }
}
