//! The domain's module folders import each other one way only, so a new module arrives as one
//! folder on top of the others and no change to one module forces a change in a module below.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module folder and the other module folders its sources name (`crate::<module>`).
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules: BTreeSet<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut graph = BTreeMap::new();
    for module in &modules {
        let mut named = BTreeSet::new();
        let mut folders = vec![src.join(module)];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                    continue;
                }
                let text = std::fs::read_to_string(path).unwrap();
                for other in modules.iter().filter(|other| *other != module) {
                    if text.contains(&format!("crate::{other}")) {
                        named.insert(other.clone());
                    }
                }
            }
        }
        graph.insert(module.clone(), named);
    }
    graph
}

#[test]
fn module_folders_import_each_other_one_way_only() {
    let graph = imports();
    assert!(graph.len() >= 5, "module folders found: {graph:?}");
    // Peel off modules that import nothing left; whatever remains is on a circle.
    let mut left = graph.clone();
    while let Some(leaf) = left
        .iter()
        .find(|(_, named)| named.iter().all(|m| !left.contains_key(m)))
        .map(|(module, _)| module.clone())
    {
        left.remove(&leaf);
    }
    assert!(left.is_empty(), "these modules import each other in a circle: {left:?}");
}
