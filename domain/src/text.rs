//! Free text as every field takes it: what it may hold, and when it may be blank.

use crate::error::DomainError;

/// A required string field: present, not blank, at most `max` characters.
pub fn required_text(value: Option<String>, param: &str, max: usize) -> Result<String, DomainError> {
    let value = value.ok_or_else(|| DomainError::missing(param))?;
    if value.trim().is_empty() {
        return Err(DomainError::invalid(
            param,
            "parameter_invalid_empty",
            format!("{param} must not be empty."),
        ));
    }
    check_text(&value, param, max)?;
    Ok(value)
}

/// An optional string field: when present, free text of at most `max` characters.
pub fn optional_text(value: Option<String>, param: &str, max: usize) -> Result<Option<String>, DomainError> {
    if let Some(value) = &value {
        check_text(value, param, max)?;
    }
    Ok(value)
}

/// An optional field that, when given, must say something (a name): a blank one is refused
/// rather than kept, as it would be where the field is required.
pub fn optional_nonblank_text(value: Option<String>, param: &str, max: usize) -> Result<Option<String>, DomainError> {
    value.map(|value| required_text(Some(value), param, max)).transpose()
}

/// An optional reason or comment: checked as free text, and a blank one taken as none, so no
/// cause or decision is recorded with nothing in its words.
pub fn optional_reason(value: Option<String>, param: &str, max: usize) -> Result<Option<String>, DomainError> {
    Ok(optional_text(value, param, max)?.filter(|text| !text.trim().is_empty()))
}

/// Free text as every field takes it: at most `max` characters, none of them control,
/// bidirectional or invisible ones.
pub fn check_text(value: &str, param: &str, max: usize) -> Result<(), DomainError> {
    if value.chars().count() > max {
        return Err(DomainError::invalid(
            param,
            "string_too_long",
            format!("{param} is at most {max} characters."),
        ));
    }
    if value.chars().any(|c| c.is_control()) {
        return Err(DomainError::invalid(
            param,
            "invalid_characters",
            format!("{param} must not contain control characters."),
        ));
    }
    if value.chars().any(is_invisible_or_bidi) {
        return Err(DomainError::invalid(
            param,
            "invalid_characters",
            format!("{param} must not contain bidirectional overrides or invisible characters."),
        ));
    }
    Ok(())
}

/// Characters that make text read differently from what it holds: bidirectional embeddings,
/// overrides, isolates and marks (a reference that displays reversed), and zero-width ones
/// (two references that look equal but are not).
pub fn is_invisible_or_bidi(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}'
        | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}'
        | '\u{FEFF}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blank_reason_is_none_and_a_bad_one_is_refused() {
        let reason = |text: &str| optional_reason(Some(text.into()), "reason", 10);
        assert_eq!(reason(" \u{a0}\u{3000} ").unwrap(), None);
        assert_eq!(reason(" late ").unwrap().as_deref(), Some(" late "));
        assert_eq!(optional_reason(None, "reason", 10).unwrap(), None);
        assert!(reason("no\u{7}").is_err());
        assert!(reason("far too long a reason").is_err());
    }
}
