//! What any ISO 20022 XML file a customer sends is checked for before it is read: well
//! formed, no DTD (so no entity is ever declared or expanded), nesting bounded, and a root
//! `Document` in the message's namespace. And where an error's element is: its line, found
//! from its path.

use super::csv_lines::{Errors, LineError};
use quick_xml::events::Event;

/// Elements nested deeper than this are refused (a pain.001 needs about 10).
pub const MAX_DEPTH: usize = 32;

/// A file that is not the message at all: one error, at the line where that shows.
pub(super) fn refused(line: usize, code: &str, message: impl Into<String>) -> (Vec<LineError>, usize) {
    let mut errors = Errors::default();
    errors.push(LineError::new(line, None, code, message));
    errors.finish()
}

/// The 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    1 + text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
}

/// A structural pass over the events: no DTD, nesting at most [`MAX_DEPTH`], well formed,
/// and a root `Document` in the namespace of one of `versions` of `message`; the version it
/// names.
pub(super) fn check_structure(
    text: &str,
    message: &str,
    namespace_prefix: &str,
    versions: std::ops::RangeInclusive<u8>,
) -> Result<u8, (Vec<LineError>, usize)> {
    let mut reader = quick_xml::Reader::from_str(text);
    let mut depth = 0usize;
    let mut version = None;
    loop {
        let position = reader.buffer_position() as usize;
        let event = match reader.read_event() {
            Ok(event) => event,
            Err(error) => {
                return Err(refused(
                    line_of(text, reader.error_position() as usize),
                    "invalid_xml",
                    format!("Not well-formed XML: {error}."),
                ))
            }
        };
        let element = match &event {
            Event::DocType(_) => {
                return Err(refused(
                    line_of(text, position),
                    "dtd_not_allowed",
                    format!("A {message} has no document type declaration; DTDs and entities are refused."),
                ))
            }
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                continue;
            }
            Event::Eof => break,
            Event::Start(element) | Event::Empty(element) => element,
            _ => continue,
        };
        if version.is_none() {
            let namespace = element
                .attributes()
                .flatten()
                .find(|a| a.key.into_inner() == "xmlns")
                .map(|a| a.value.into_owned());
            let found = namespace
                .as_deref()
                .and_then(|ns| ns.strip_prefix(namespace_prefix))
                .and_then(|v| v.parse::<u8>().ok())
                .filter(|v| versions.contains(v));
            match (element.local_name().into_inner(), found) {
                ("Document", Some(found)) => version = Some(found),
                _ => {
                    return Err(refused(
                        line_of(text, position),
                        "wrong_message",
                        format!(
                            "The root is not a Document in a {message} namespace ({namespace_prefix}{:02} to {namespace_prefix}{:02}); found {} in {}.",
                            versions.start(),
                            versions.end(),
                            element.name().into_inner(),
                            namespace.as_deref().unwrap_or("no namespace")
                        ),
                    ))
                }
            }
        }
        if matches!(event, Event::Start(_)) {
            depth += 1;
            if depth > MAX_DEPTH {
                return Err(refused(
                    line_of(text, position),
                    "too_deep",
                    format!("Elements are nested at most {MAX_DEPTH} deep."),
                ));
            }
        }
    }
    version.ok_or_else(|| {
        refused(
            1,
            "wrong_message",
            format!("The file holds no XML element: a {message} is an XML Document."),
        )
    })
}

/// The line each error's element starts on (its nearest present ancestor's, for an element
/// that is missing), found by walking the document's elements once.
pub(super) fn place(text: &str, errors: &mut [LineError]) {
    use std::collections::HashMap;
    // Every error's path and each of its ancestors: where each one starts, once seen.
    let mut lines: HashMap<String, Option<usize>> = HashMap::new();
    for path in errors.iter().filter_map(|e| e.path.as_deref()) {
        for (cut, _) in path.match_indices('/').skip(1) {
            lines.insert(path[..cut].to_owned(), None);
        }
        lines.insert(path.to_owned(), None);
    }
    let mut reader = quick_xml::Reader::from_str(text);
    let (mut counted_to, mut newlines) = (0, 0);
    let mut path = String::new();
    // For each open element: where its path ends, and how many of each child it has seen.
    let mut open: Vec<(usize, HashMap<String, usize>)> = vec![(0, HashMap::new())];
    loop {
        let position = reader.buffer_position() as usize;
        let (element, empty) = match reader.read_event() {
            Ok(Event::Start(element)) => (element, false),
            Ok(Event::Empty(element)) => (element, true),
            Ok(Event::End(_)) => {
                let (length, _) = open.pop().unwrap_or_default();
                path.truncate(length);
                continue;
            }
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => continue,
        };
        let name = element.local_name().into_inner().to_owned();
        let seen = open.last_mut().map_or(1, |(_, seen)| {
            let count = seen.entry(name.clone()).or_default();
            *count += 1;
            *count
        });
        let length = path.len();
        path.push('/');
        path.push_str(&name);
        if matches!(name.as_str(), "PmtInf" | "CdtTrfTxInf") {
            path.push_str(&format!("[{seen}]"));
        }
        // Lines counted as the reader moves on, each byte once: a file of many errors is
        // placed in one pass, not one count from the start per error.
        newlines += text.as_bytes()[counted_to..position]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        counted_to = position;
        if let Some(line @ None) = lines.get_mut(&path) {
            *line = Some(1 + newlines);
        }
        if empty {
            path.truncate(length);
        } else {
            open.push((length, HashMap::new()));
        }
    }
    for error in errors.iter_mut() {
        let Some(path) = error.path.as_deref() else { continue };
        let mut ancestors = path
            .match_indices('/')
            .skip(1)
            .map(|(cut, _)| &path[..cut])
            .collect::<Vec<_>>();
        ancestors.push(path);
        error.line = ancestors
            .iter()
            .rev()
            .find_map(|at| lines.get(*at).copied().flatten())
            .unwrap_or(1);
    }
}
