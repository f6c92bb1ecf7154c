//! The six fields of a cron expression as EventBridge Scheduler takes them: their ranges,
//! names and day forms, checked before the matching sees them, so that a refusal names the
//! field and the value in the Scheduler's terms.

use super::expression::invalid;
use crate::error::DomainError;

/// One of a cron expression's six fields, as the Scheduler takes it.
pub(super) struct CronField {
    name: &'static str,
    min: u32,
    max: u32,
    /// The names it takes for its values, the first for `min`.
    names: &'static [&'static str],
}

pub(super) const CRON_FIELDS: [CronField; 6] = [
    CronField {
        name: "minutes",
        min: 0,
        max: 59,
        names: &[],
    },
    CronField {
        name: "hours",
        min: 0,
        max: 23,
        names: &[],
    },
    CronField {
        name: "day-of-month",
        min: 1,
        max: 31,
        names: &[],
    },
    CronField {
        name: "month",
        min: 1,
        max: 12,
        names: &[
            "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
        ],
    },
    CronField {
        name: "day-of-week",
        min: 1,
        max: 7,
        names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
    },
    CronField {
        name: "year",
        min: 1970,
        max: 2199,
        names: &[],
    },
];

impl CronField {
    /// Whether `text` is one of the day fields' `L`, `W` or `#` forms, each taken alone as the
    /// Scheduler takes them (`JUL`, `WED` and `wed` are names, not these).
    fn special_day(&self, text: &str) -> Result<bool, DomainError> {
        let upper = text.to_ascii_uppercase();
        match self.name {
            "day-of-month" if upper == "L" || upper == "LW" => Ok(true),
            "day-of-month" => match upper.strip_suffix('W') {
                Some(day) => self.value(day).map(|_| true),
                None => Ok(false),
            },
            "day-of-week" if upper == "L" => Ok(true),
            "day-of-week" if self.names.iter().any(|name| name.eq_ignore_ascii_case(text)) => Ok(false),
            "day-of-week" => {
                if let Some((day, nth)) = upper.split_once('#') {
                    self.value(day)?;
                    if !nth.parse::<u32>().is_ok_and(|nth| (1..=5).contains(&nth)) {
                        return Err(self.refuse(format!("'{text}' names week {nth} of a month (1 to 5)")));
                    }
                    return Ok(true);
                }
                match upper.strip_suffix('L') {
                    Some(day) => self.value(day).map(|_| true),
                    None => Ok(false),
                }
            }
            _ => Ok(false),
        }
    }

    /// Refuses a value out of the field's range, naming the field and the value, so that the
    /// matching (whose bounds and messages differ) only ever sees values the Scheduler takes.
    pub(super) fn check(&self, text: &str) -> Result<(), DomainError> {
        if self.special_day(text)? {
            return Ok(());
        }
        for part in text.split(',') {
            let (base, step) = match part.split_once('/') {
                Some((base, step)) => (base, Some(step)),
                None => (part, None),
            };
            if let Some(step) = step {
                if !step.parse::<u32>().is_ok_and(|step| (1..=self.max).contains(&step)) {
                    return Err(self.refuse(format!(
                        "its step '{step}' is not a whole number from 1 to {}",
                        self.max
                    )));
                }
            }
            if base == "*" || base == "?" {
                continue;
            }
            let (first, last) = base.split_once('-').unwrap_or((base, base));
            let (first, last) = (self.value(first)?, self.value(last)?);
            if first > last {
                return Err(self.refuse(format!("the range '{base}' runs backwards")));
            }
        }
        Ok(())
    }

    fn value(&self, text: &str) -> Result<u32, DomainError> {
        let named = self.names.iter().position(|name| name.eq_ignore_ascii_case(text));
        let value = match named {
            Some(at) => self.min + at as u32,
            None => text.parse::<u32>().map_err(|_| {
                let names = match self.names {
                    [] => String::new(),
                    names => format!(" or a name ({}-{})", names[0], names[names.len() - 1]),
                };
                self.refuse(format!("'{text}' is not a number{names}"))
            })?,
        };
        if !(self.min..=self.max).contains(&value) {
            return Err(self.refuse(format!("'{text}' is not from {} to {}", self.min, self.max)));
        }
        Ok(value)
    }

    fn refuse(&self, why: String) -> DomainError {
        invalid(
            "invalid_expression",
            format!("The cron expression's {} field: {why}.", self.name),
        )
    }
}
