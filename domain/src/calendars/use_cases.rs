//! Calendars and rails' cut-offs, set by the platform; the next cut-off, asked by anyone.

use super::{
    next_cutoff, parse_time, read_holidays, AfterLastCutoff, Calendar, Cutoff, Holiday, RailCutoffs, WEEKDAYS,
};
use crate::access::{require_platform_admin, Principal, Scope};
use crate::cause::Cause;
use crate::error::DomainError;
use crate::idempotency::Ticket;
use crate::ids::CalendarId;
use crate::ports::{AuditEntry, Changeset, Write};
use crate::service::Service;
use crate::text::required_text;
use serde::{Deserialize, Serialize};
use time::{Date, OffsetDateTime};

/// The most holidays a calendar keeps (about ten years of them).
pub const MAX_HOLIDAYS: usize = 1_000;

/// `POST /v1/calendars`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateCalendar {
    pub name: Option<String>,
    pub timezone: Option<String>,
    /// `mon` … `sun`; Monday to Friday when absent.
    pub working_days: Option<Vec<String>>,
    pub holidays: Option<Vec<HolidayParam>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HolidayParam {
    pub date: Option<String>,
    pub name: Option<String>,
}

/// `POST /v1/calendars/{id}/holidays`: a year's public holidays, replacing that year's.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportHolidays {
    pub year: Option<i32>,
    /// `csv` or `ical`.
    pub format: Option<String>,
    /// The file's text.
    pub file: Option<String>,
}

/// `PUT /v1/rails/{rail}/cutoffs`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutRailCutoffs {
    pub calendar_id: Option<String>,
    /// `HH:MM` in the calendar's time zone.
    pub cutoffs: Option<Vec<String>>,
    pub after_last_cutoff: Option<AfterLastCutoff>,
}

/// `GET /v1/rails/{rail}/next_cutoff`.
#[derive(Debug, Serialize)]
pub struct NextCutoff {
    pub rail: String,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub calendar_id: CalendarId,
    #[serde(flatten)]
    pub cutoff: Cutoff,
}

fn working_days(days: Option<Vec<String>>) -> Result<Vec<String>, DomainError> {
    let Some(days) = days else {
        return Ok(["mon", "tue", "wed", "thu", "fri"].map(String::from).to_vec());
    };
    let mut chosen = [false; 7];
    for (i, day) in days.iter().enumerate() {
        let at = WEEKDAYS
            .iter()
            .position(|(name, _)| name.eq_ignore_ascii_case(day))
            .ok_or_else(|| {
                DomainError::invalid(
                    format!("working_days[{i}]"),
                    "invalid_weekday",
                    format!("'{day}' is not a day of the week: mon, tue, wed, thu, fri, sat or sun."),
                )
            })?;
        chosen[at] = true;
    }
    if !chosen.contains(&true) {
        return Err(DomainError::invalid(
            "working_days",
            "no_working_days",
            "A calendar works on at least one day of the week.",
        ));
    }
    Ok(WEEKDAYS
        .iter()
        .zip(chosen)
        .filter(|(_, on)| *on)
        .map(|((name, _), _)| (*name).to_owned())
        .collect())
}

fn holidays(params: Option<Vec<HolidayParam>>) -> Result<Vec<Holiday>, DomainError> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    let mut holidays = Vec::new();
    for (i, param) in params.unwrap_or_default().into_iter().enumerate() {
        let field = format!("holidays[{i}].date");
        let date = required_text(param.date, &field, 10)?;
        let date = Date::parse(&date, &format)
            .map_err(|_| DomainError::invalid(&field, "invalid_date", format!("{field} is a date: YYYY-MM-DD.")))?;
        let name = required_text(param.name, &format!("holidays[{i}].name"), 80)?;
        holidays.push(Holiday { date, name });
    }
    holidays.sort_by_key(|h| h.date);
    holidays.dedup_by_key(|h| h.date);
    if holidays.len() > MAX_HOLIDAYS {
        return Err(DomainError::invalid(
            "holidays",
            "too_many_holidays",
            format!("A calendar keeps at most {MAX_HOLIDAYS} holidays."),
        ));
    }
    Ok(holidays)
}

impl Service {
    /// Makes a banking calendar (platform admins).
    pub async fn create_calendar(
        &self,
        principal: &Principal,
        command: CreateCalendar,
        ticket: Option<Ticket<Calendar>>,
    ) -> Result<Calendar, DomainError> {
        require_platform_admin(principal)?;
        let name = required_text(command.name, "name", 80)?;
        let timezone = required_text(command.timezone, "timezone", 64)?;
        crate::zone::parse_zone(&timezone)?;
        let now = self.now();
        let calendar = Calendar {
            id: CalendarId::new(&*self.ids),
            name,
            timezone,
            working_days: working_days(command.working_days)?,
            holidays: holidays(command.holidays)?,
            cause: Cause::new("calendar_created", "Calendar created", principal.actor(), now),
            created_at: now,
            updated_at: now,
            environment: self.environment,
            version: 1,
        };
        let mut changes = Changeset::default();
        changes.push(Write::Audit(
            AuditEntry::new("calendar", &calendar.id, "created", calendar.cause.clone()).moving(None, "active"),
        ));
        changes.push(Write::PutCalendar(calendar.clone()));
        self.commit_created(changes, ticket, &calendar).await?;
        Ok(calendar)
    }

    /// A calendar, to anyone who may read operations (a customer's schedule names one).
    pub async fn get_calendar(&self, principal: &Principal, id: &CalendarId) -> Result<Calendar, DomainError> {
        principal.require(Scope::OperationsRead)?;
        self.store
            .calendar(id)
            .await?
            .filter(|c| c.environment == self.environment)
            .ok_or_else(|| DomainError::not_found("calendar", id))
    }

    /// Replaces a calendar's holidays of one year with those of a published list, audited
    /// with how many there were and are.
    pub async fn import_holidays(
        &self,
        principal: &Principal,
        id: &CalendarId,
        command: ImportHolidays,
    ) -> Result<Calendar, DomainError> {
        require_platform_admin(principal)?;
        let year = command.year.ok_or_else(|| DomainError::missing("year"))?;
        if !(2000..=2200).contains(&year) {
            return Err(DomainError::invalid(
                "year",
                "invalid_year",
                "year is from 2000 to 2200.",
            ));
        }
        let format = required_text(command.format, "format", 8)?;
        let file = command.file.ok_or_else(|| DomainError::missing("file"))?;
        let imported = read_holidays(&format, &file, year)?;
        let mut calendar = self.get_calendar(principal, id).await?;
        let before = calendar.holidays.iter().filter(|h| h.date.year() == year).count();
        calendar.holidays.retain(|h| h.date.year() != year);
        let count = imported.len();
        calendar.holidays.extend(imported);
        calendar.holidays.sort_by_key(|h| h.date);
        if calendar.holidays.len() > MAX_HOLIDAYS {
            return Err(DomainError::invalid(
                "file",
                "too_many_holidays",
                format!("A calendar keeps at most {MAX_HOLIDAYS} holidays."),
            ));
        }
        let now = self.now();
        calendar.cause = Cause::new(
            "holidays_imported",
            format!("{year}'s holidays imported from {format}: {count} (were {before})"),
            principal.actor(),
            now,
        );
        calendar.updated_at = now;
        calendar.version += 1;
        let mut changes = Changeset::default();
        changes.push(Write::Audit(
            AuditEntry::new("calendar", &calendar.id, "holidays_imported", calendar.cause.clone())
                .with_details(serde_json::json!({"year": year, "holidays": count, "were": before})),
        ));
        changes.push(Write::PutCalendar(calendar.clone()));
        self.commit(changes).await?;
        Ok(calendar)
    }

    /// Names a rail's calendar and its cut-offs (platform admins), audited.
    pub async fn put_rail_cutoffs(
        &self,
        principal: &Principal,
        rail: &str,
        command: PutRailCutoffs,
    ) -> Result<RailCutoffs, DomainError> {
        require_platform_admin(principal)?;
        if !self.rails.contains(rail) {
            return Err(DomainError::not_found("rail", rail));
        }
        let calendar_id = required_text(command.calendar_id, "calendar_id", 40)?;
        let calendar_id = self.named_calendar(&calendar_id).await?.id;
        let texts = command.cutoffs.ok_or_else(|| DomainError::missing("cutoffs"))?;
        let mut cutoffs = Vec::with_capacity(texts.len());
        for (i, text) in texts.iter().enumerate() {
            let time = parse_time(text).ok_or_else(|| {
                DomainError::invalid(
                    format!("cutoffs[{i}]"),
                    "invalid_time",
                    "A cut-off is a time, HH:MM (24-hour).",
                )
            })?;
            cutoffs.push(time);
        }
        cutoffs.sort();
        cutoffs.dedup();
        if cutoffs.is_empty() || cutoffs.len() > 8 {
            return Err(DomainError::invalid(
                "cutoffs",
                "invalid_cutoffs",
                "A rail has 1 to 8 cut-offs a day.",
            ));
        }
        let current = self.store.rail_cutoffs(rail, self.environment).await?;
        let version = current.as_ref().map_or(0, |c| c.version) + 1;
        let cause = Cause::new(
            "rail_cutoffs_saved",
            format!("Cut-offs of {rail} saved as version {version}"),
            principal.actor(),
            self.now(),
        );
        let saved = RailCutoffs {
            rail: rail.to_owned(),
            environment: self.environment,
            calendar_id,
            cutoffs,
            after_last_cutoff: command.after_last_cutoff.unwrap_or_default(),
            cause: cause.clone(),
            version,
        };
        let mut changes = Changeset::default();
        let action = if current.is_none() { "created" } else { "updated" };
        changes.push(Write::Audit(
            AuditEntry::new("rail_cutoffs", &format!("rail_cutoffs:{rail}"), action, cause)
                .with_details(serde_json::to_value(&saved).unwrap_or_default()),
        ));
        changes.push(Write::PutRailCutoffs(saved.clone()));
        self.commit(changes).await?;
        Ok(saved)
    }

    /// The next cut-off of `rail` at or after `at` (now when absent), and the day a
    /// submission made then settles.
    /// The calendar of this environment a request's `calendar_id` names, or its refusal by
    /// that field.
    pub(crate) async fn named_calendar(&self, text: &str) -> Result<Calendar, DomainError> {
        let calendar_id = CalendarId::parse(text).ok_or_else(|| {
            DomainError::invalid("calendar_id", "invalid_id", "calendar_id is a calendar's id (cal_…).")
        })?;
        self.store
            .calendar(&calendar_id)
            .await?
            .filter(|c| c.environment == self.environment)
            .ok_or_else(|| DomainError::missing_reference("calendar_id", format!("No such calendar: '{calendar_id}'")))
    }

    /// The cut-off a submission to `rail` at `at` is for, when the rail keeps cut-offs (none
    /// when it keeps none, or its calendar is gone or has no banking day within a year).
    pub(crate) async fn rail_cutoff(&self, rail: &str, at: OffsetDateTime) -> Result<Option<Cutoff>, DomainError> {
        let Some(settings) = self.store.rail_cutoffs(rail, self.environment).await? else {
            return Ok(None);
        };
        let Some(calendar) = self.store.calendar(&settings.calendar_id).await? else {
            return Ok(None);
        };
        let zone = crate::zone::parse_zone(&calendar.timezone)?;
        Ok(next_cutoff(
            &calendar,
            zone,
            &settings.cutoffs,
            settings.after_last_cutoff,
            at,
        ))
    }

    pub async fn next_cutoff(
        &self,
        principal: &Principal,
        rail: &str,
        at: Option<OffsetDateTime>,
    ) -> Result<NextCutoff, DomainError> {
        principal.require(Scope::OperationsRead)?;
        if !self.rails.contains(rail) {
            return Err(DomainError::not_found("rail", rail));
        }
        let settings = self.store.rail_cutoffs(rail, self.environment).await?.ok_or_else(|| {
            DomainError::invalid_state(
                "rail_has_no_cutoffs",
                format!("No cut-offs are set for {rail}: PUT /v1/rails/{rail}/cutoffs."),
            )
        })?;
        let calendar = self
            .store
            .calendar(&settings.calendar_id)
            .await?
            .ok_or_else(|| DomainError::not_found("calendar", &settings.calendar_id))?;
        let zone = crate::zone::parse_zone(&calendar.timezone)?;
        let at = at.unwrap_or_else(|| self.now());
        let cutoff =
            next_cutoff(&calendar, zone, &settings.cutoffs, settings.after_last_cutoff, at).ok_or_else(|| {
                DomainError::invalid_state(
                    "no_banking_day",
                    format!("Calendar {} has no banking day within a year of {at}.", calendar.id),
                )
            })?;
        Ok(NextCutoff {
            rail: rail.to_owned(),
            at,
            calendar_id: calendar.id,
            cutoff,
        })
    }
}
