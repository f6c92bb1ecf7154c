//! A year of public holidays, imported as a CSV (`date,name`, the header optional) or an
//! iCalendar file (each `VEVENT`'s `DTSTART` date and `SUMMARY`), as governments and
//! calendar services publish them. A refusal names the line and column.

use super::Holiday;
use crate::error::DomainError;
use time::Date;

/// The most holidays a year may list.
pub const MAX_HOLIDAYS_A_YEAR: usize = 100;

fn refused(line: usize, column: usize, what: impl std::fmt::Display) -> DomainError {
    DomainError::invalid(
        "file",
        "invalid_holidays",
        format!("Line {line}, column {column}: {what}"),
    )
}

fn in_year(date: Date, year: i32, line: usize, column: usize) -> Result<Date, DomainError> {
    if date.year() != year {
        return Err(refused(line, column, format!("{date} is not in {year}")));
    }
    Ok(date)
}

/// The holidays `text` lists for `year` (`format` is `csv` or `ical`), by date, each once.
pub fn read_holidays(format: &str, text: &str, year: i32) -> Result<Vec<Holiday>, DomainError> {
    let mut holidays = match format {
        "csv" => csv(text, year)?,
        "ical" => ical(text, year)?,
        _ => {
            return Err(DomainError::invalid(
                "format",
                "invalid_format",
                "format is csv or ical.",
            ))
        }
    };
    holidays.sort_by_key(|h| h.date);
    holidays.dedup_by_key(|h| h.date);
    if holidays.len() > MAX_HOLIDAYS_A_YEAR {
        return Err(DomainError::invalid(
            "file",
            "too_many_holidays",
            format!("A year has at most {MAX_HOLIDAYS_A_YEAR} holidays."),
        ));
    }
    Ok(holidays)
}

fn csv(text: &str, year: i32) -> Result<Vec<Holiday>, DomainError> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    let mut holidays = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || (n == 0 && line.trim().eq_ignore_ascii_case("date,name")) {
            continue;
        }
        let (date, name) = line.split_once(',').unwrap_or((line, ""));
        let date = Date::parse(date.trim(), &format)
            .map_err(|_| refused(n + 1, 1, format!("{:?} is not a date (YYYY-MM-DD)", date.trim())))?;
        let name = name.trim().trim_matches('"').trim();
        if name.is_empty() || name.chars().count() > 80 || name.chars().any(char::is_control) {
            return Err(refused(
                n + 1,
                line.find(',').map_or(line.len() + 1, |c| c + 2),
                "a holiday has a name of 1 to 80 characters",
            ));
        }
        holidays.push(Holiday {
            date: in_year(date, year, n + 1, 1)?,
            name: name.to_owned(),
        });
    }
    Ok(holidays)
}

/// The lines of an iCalendar file, unfolded (a line beginning with a space or tab continues
/// the one before), each with the line it began on.
fn unfolded(text: &str) -> Vec<(usize, String)> {
    let mut lines: Vec<(usize, String)> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let raw = raw.trim_end_matches('\r');
        match (raw.strip_prefix([' ', '\t']), lines.last_mut()) {
            (Some(rest), Some((_, last))) => last.push_str(rest),
            _ => lines.push((n + 1, raw.to_owned())),
        }
    }
    lines
}

fn ical(text: &str, year: i32) -> Result<Vec<Holiday>, DomainError> {
    let format = time::macros::format_description!("[year][month][day]");
    let mut holidays = Vec::new();
    let mut event: Option<(usize, Option<Date>, Option<String>)> = None;
    for (line, content) in unfolded(text) {
        let (name, value) = content.split_once(':').unwrap_or((content.as_str(), ""));
        let property = name.split(';').next().unwrap_or_default().to_ascii_uppercase();
        match (property.as_str(), value, event.as_mut()) {
            ("BEGIN", "VEVENT", _) => event = Some((line, None, None)),
            ("DTSTART", _, Some(open)) => {
                let column = name.len() + 2;
                let date = value
                    .get(..8)
                    .and_then(|d| Date::parse(d, &format).ok())
                    .ok_or_else(|| refused(line, column, format!("DTSTART {value:?} is not a date (YYYYMMDD)")))?;
                open.1 = Some(in_year(date, year, line, column)?);
            }
            ("SUMMARY", _, Some(open)) => {
                let summary = value.replace("\\,", ",").replace("\\;", ";").replace("\\n", " ");
                open.2 = Some(summary.trim().chars().filter(|c| !c.is_control()).take(80).collect());
            }
            ("END", "VEVENT", _) => {
                let (began, date, summary) = event
                    .take()
                    .ok_or_else(|| refused(line, 1, "END:VEVENT without BEGIN:VEVENT"))?;
                let date = date.ok_or_else(|| refused(began, 1, "the event has no DTSTART"))?;
                holidays.push(Holiday {
                    date,
                    name: summary
                        .filter(|s| !s.is_empty())
                        .unwrap_or_else(|| "Holiday".to_owned()),
                });
            }
            _ => {}
        }
    }
    if let Some((began, ..)) = event {
        return Err(refused(began, 1, "BEGIN:VEVENT is never ended"));
    }
    Ok(holidays)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    #[test]
    fn a_csv_or_an_icalendar_year_of_holidays_is_read() {
        let csv = read_holidays(
            "csv",
            "date,name\n2026-12-25,Navidad\n2026-09-18,\"Fiestas Patrias\"\n",
            2026,
        )
        .unwrap();
        assert_eq!(
            csv.iter().map(|h| (h.date, h.name.as_str())).collect::<Vec<_>>(),
            [
                (date!(2026 - 09 - 18), "Fiestas Patrias"),
                (date!(2026 - 12 - 25), "Navidad")
            ]
        );
        let ical = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20260101\r\nSUMMARY:Año \r\n Nuevo\r\nEND:VEVENT\r\n\
                    BEGIN:VEVENT\r\nSUMMARY:Día del Trabajo\r\nDTSTART:20260501T000000\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        let read = read_holidays("ical", ical, 2026).unwrap();
        assert_eq!(
            read.iter().map(|h| (h.date, h.name.as_str())).collect::<Vec<_>>(),
            [
                (date!(2026 - 01 - 01), "Año Nuevo"),
                (date!(2026 - 05 - 01), "Día del Trabajo")
            ]
        );
    }

    #[test]
    fn a_refusal_names_the_line_and_column() {
        let message = |format, text| match read_holidays(format, text, 2026) {
            Err(DomainError::InvalidRequest { message, .. }) => message,
            other => panic!("not refused: {other:?}"),
        };
        assert_eq!(
            message("csv", "2026-12-25,Navidad\n2026-13-01,X\n"),
            "Line 2, column 1: \"2026-13-01\" is not a date (YYYY-MM-DD)"
        );
        assert_eq!(
            message("csv", "2027-01-01,Año Nuevo\n"),
            "Line 1, column 1: 2027-01-01 is not in 2026"
        );
        assert_eq!(
            message("csv", "2026-01-01,\n"),
            "Line 1, column 12: a holiday has a name of 1 to 80 characters"
        );
        assert_eq!(
            message("ical", "BEGIN:VEVENT\nDTSTART;VALUE=DATE:2026-01-01\nEND:VEVENT\n"),
            "Line 2, column 20: DTSTART \"2026-01-01\" is not a date (YYYYMMDD)"
        );
        assert_eq!(
            message("ical", "BEGIN:VEVENT\nSUMMARY:X\nEND:VEVENT\n"),
            "Line 1, column 1: the event has no DTSTART"
        );
    }
}
