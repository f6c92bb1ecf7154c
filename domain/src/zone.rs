//! IANA time zones (chrono-tz's bundled database) and wall-clock times in them, for the
//! modules that keep time as people and banks do (schedules, banking calendars).

use crate::error::DomainError;
use chrono::{LocalResult, NaiveDateTime, TimeZone};
pub use chrono_tz::Tz;
use std::str::FromStr;
use time::{OffsetDateTime, PrimitiveDateTime};

/// An IANA time zone name.
pub fn parse_zone(name: &str) -> Result<Tz, DomainError> {
    Tz::from_str(name).map_err(|_| {
        DomainError::invalid(
            "timezone",
            "invalid_timezone",
            format!("'{name}' is not an IANA time zone."),
        )
    })
}

/// When a wall-clock time happens in `zone`: the first of two in an autumn change, none in a
/// spring change's gap.
pub fn first_instant(zone: Tz, wall: NaiveDateTime) -> Option<OffsetDateTime> {
    let instant = match zone.from_local_datetime(&wall) {
        LocalResult::Single(instant) => instant,
        LocalResult::Ambiguous(first, _) => first,
        LocalResult::None => return None,
    };
    OffsetDateTime::from_unix_timestamp(instant.timestamp()).ok()
}

/// The wall-clock time `at` is in `zone` (to the second).
pub fn wall_clock(at: OffsetDateTime, zone: Tz) -> Option<PrimitiveDateTime> {
    let local = chrono::DateTime::from_timestamp(at.unix_timestamp(), 0)?
        .with_timezone(&zone)
        .naive_local();
    let shifted = OffsetDateTime::from_unix_timestamp(local.and_utc().timestamp()).ok()?;
    Some(PrimitiveDateTime::new(shifted.date(), shifted.time()))
}

/// When the wall-clock time `wall` happens in `zone` (as [`first_instant`]).
pub fn instant_of(wall: PrimitiveDateTime, zone: Tz) -> Option<OffsetDateTime> {
    let naive = chrono::DateTime::from_timestamp(wall.assume_utc().unix_timestamp(), 0)?.naive_utc();
    first_instant(zone, naive)
}

/// When the wall-clock time `wall` happens in `zone`, or, when it falls in a daylight-saving
/// gap, the first minute after the gap: a time a rule asks for is never skipped.
pub fn instant_at_or_after(wall: PrimitiveDateTime, zone: Tz) -> Option<OffsetDateTime> {
    (0..=180).find_map(|minutes| instant_of(wall + time::Duration::minutes(minutes), zone))
}
