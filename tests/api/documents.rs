//! The documents stay true to the repository: every link resolves, nothing points outside the
//! repository, and the checklist for adding a module names what every module really has.

use regex_lite::Regex;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The README, the documents beside it and every Markdown file in `docs/`.
fn documents() -> Vec<PathBuf> {
    let root = repository();
    let mut found: Vec<PathBuf> = ["README.md", "SECURITY.md", "BENCHMARKS.md"]
        .iter()
        .map(|name| root.join(name))
        .collect();
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "md") {
            found.push(path);
        }
    }
    found
}

/// A heading's anchor as GitHub makes it: lowercase, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut found = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            found.insert(anchor(line.trim_start_matches('#')));
        }
    }
    found
}

/// The links of a document that are not fetched from the web: `(target, fragment)`.
fn local_links(text: &str) -> Vec<(String, Option<String>)> {
    let link = Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    link.captures_iter(text)
        .map(|c| c[1].to_string())
        .filter(|target| !target.contains("://") && !target.starts_with("mailto:"))
        .map(|target| match target.split_once('#') {
            Some((file, fragment)) => (file.to_string(), Some(fragment.to_string())),
            None => (target, None),
        })
        .collect()
}

#[test]
fn every_link_between_the_documents_resolves_to_a_file_and_heading() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for document in documents() {
        let text = read(&document);
        for (file, fragment) in local_links(&text) {
            checked += 1;
            let target = if file.is_empty() {
                document.clone()
            } else {
                document.parent().unwrap().join(&file)
            };
            if !target.exists() {
                broken.push(format!("{}: {file} does not exist", document.display()));
                continue;
            }
            if let Some(fragment) = fragment {
                if !anchors(&read(&target)).contains(&fragment) {
                    broken.push(format!("{}: {file} has no heading #{fragment}", document.display()));
                }
            }
        }
    }
    assert!(
        checked >= 30,
        "only {checked} links found: is the parser reading the documents?"
    );
    assert!(broken.is_empty(), "{broken:#?}");
}

#[test]
fn an_anchor_is_the_heading_as_github_writes_it() {
    assert_eq!(
        anchor(" The stack as SAM deploys it, on one machine"),
        "the-stack-as-sam-deploys-it-on-one-machine"
    );
    assert_eq!(
        anchor("Running locally against LocalStack, moto or real AWS"),
        "running-locally-against-localstack-moto-or-real-aws"
    );
    let text = "# A\n```sh\n# not a heading\n```\n## B, c\n";
    assert_eq!(anchors(text), BTreeSet::from(["a".to_string(), "b-c".to_string()]));
}

/// Source and documents a reader of the repository reads: nothing in them may send the reader
/// outside it (a sibling directory, an issue tracker's number).
fn readable_files() -> Vec<PathBuf> {
    let root = repository();
    let mut files = documents();
    let mut folders: Vec<PathBuf> = ["domain", "infra", "functions", "tests", "bench", "events"]
        .iter()
        .map(|folder| root.join(folder))
        .collect();
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(name.as_str(), "node_modules" | "target" | "screenshots") {
                    folders.push(path);
                }
            } else if ["rs", "md", "py", "js", "yaml", "toml"]
                .iter()
                .any(|ext| name.ends_with(&format!(".{ext}")))
            {
                files.push(path);
            }
        }
    }
    files.push(root.join("template.yaml"));
    files
}

#[test]
fn no_document_or_source_points_outside_the_repository_or_at_an_issue_number() {
    let issue = Regex::new(r"(?i)\bissues? #?\d+|\bgithub\.com/[^\s)]+/issues/\d+").unwrap();
    let files = readable_files();
    assert!(files.len() > 200, "only {} files read", files.len());
    // Spelled in two halves, so that this file does not find itself.
    let outside = [concat!("../", "shared"), concat!("DESIGN", ".md")];
    let mut found = Vec::new();
    for path in files {
        let text = read(&path);
        for (number, line) in text.lines().enumerate() {
            if outside.iter().any(|name| line.contains(name)) || issue.is_match(line) {
                found.push(format!("{}:{}: {}", path.display(), number + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// The domain's module folders (the port traits' own folder aside).
fn modules() -> Vec<String> {
    let src = repository().join("domain/src");
    let mut found: Vec<String> = std::fs::read_dir(src)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|name| name != "ports")
        .collect();
    found.sort();
    found
}

#[test]
fn every_path_the_checklist_names_exists_for_every_module() {
    let root = repository();
    let checklist = read(&root.join("docs/adding-a-module.md"));
    let path = Regex::new(r"`((?:[a-z_.<>-]+/)+[a-z_.<>-]+\.(?:rs|json)|template\.yaml)`").unwrap();
    let named: BTreeSet<String> = path.captures_iter(&checklist).map(|c| c[1].to_string()).collect();
    assert!(named.len() >= 15, "paths read from the checklist: {named:?}");
    let modules = modules();
    assert!(modules.len() >= 10, "{modules:?}");
    let mut missing = Vec::new();
    for path in &named {
        let expected: Vec<PathBuf> = if path.contains("<module>") {
            modules
                .iter()
                .map(|module| root.join(path.replace("<module>", module)))
                .collect()
        } else if path.contains("<new>") {
            let folder = path.split("<new>").next().unwrap();
            vec![root.join(folder)]
        } else {
            vec![root.join(path)]
        };
        missing.extend(
            expected
                .into_iter()
                .filter(|p| !p.exists())
                .map(|p| p.display().to_string()),
        );
    }
    assert!(
        missing.is_empty(),
        "the checklist names what is not there: {missing:#?}"
    );
}

#[test]
fn every_module_has_what_the_checklist_says_a_module_has() {
    let root = repository();
    let lib = read(&root.join("domain/src/lib.rs"));
    let ports = read(&root.join("domain/src/ports.rs"));
    let store = &ports[ports.find("pub trait Store:").unwrap()..];
    let store = &store[..store.find('{').unwrap()];
    let adapter = |folder: &str| {
        std::fs::read_dir(root.join(folder))
            .unwrap()
            .map(|entry| read(&entry.unwrap().path()))
            .collect::<String>()
    };
    let sqlite = adapter("infra/src/embedded/sqlite_store");
    let dynamo = adapter("infra/src/aws/dynamo_store");
    let handlers = read(&root.join("functions/api/src/handlers/mod.rs"));
    let port = Regex::new(r"pub trait (\w+Store)\b").unwrap();
    let mut wrong = Vec::new();
    for module in modules() {
        if !lib.contains(&format!("pub mod {module};")) {
            wrong.push(format!("{module}: no `pub mod {module};` in domain/src/lib.rs"));
        }
        if !handlers.contains(&format!("mod {module};")) {
            wrong.push(format!("{module}: not named in functions/api/src/handlers/mod.rs"));
        }
        let model = read(&root.join(format!("domain/src/{module}/mod.rs")));
        let Some(trait_name) = port.captures(&model).map(|c| c[1].to_string()) else {
            wrong.push(format!("{module}: no store port in its mod.rs"));
            continue;
        };
        if !store.contains(&trait_name) {
            wrong.push(format!("{module}: {trait_name} is not part of Store"));
        }
        for (name, text) in [("SQLite", &sqlite), ("DynamoDB", &dynamo)] {
            if !text.contains(&format!("impl {trait_name} for")) {
                wrong.push(format!("{module}: the {name} store does not implement {trait_name}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
