//! `template.yaml` cannot drift from the code: every binary is a function, every API
//! function routes the method and path its binary serves, the table has every index the store
//! queries, and the queues dead-letter as the embedded ones do.

use std::path::Path;

fn template() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join("../../template.yaml")).unwrap()
}

/// What follows `key` on each line that starts with it (indentation aside), in order.
fn values_of<'a>(template: &'a str, key: &str) -> Vec<&'a str> {
    template
        .lines()
        .filter_map(|line| line.trim().strip_prefix(key))
        .collect()
}

#[test]
fn every_binary_is_a_function_of_the_template_with_its_route() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let template = template();
    // Resources are the lines indented by exactly two spaces; each block runs to the next.
    let mut blocks: Vec<String> = vec![];
    for line in template.lines() {
        if line.starts_with("  ") && !line.starts_with("   ") {
            blocks.push(String::new());
        }
        if let Some(block) = blocks.last_mut() {
            block.push_str(line.trim_start());
            block.push('\n');
        }
    }
    blocks.retain(|b| b.contains("BuildMethod: rust-cargolambda"));
    let mut binaries = 0;
    for entry in std::fs::read_dir(root.join("src/bin")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let source = std::fs::read_to_string(&path).unwrap();
        let block = blocks
            .iter()
            .find(|b| b.contains(&format!("Binary: {name}\n")))
            .unwrap_or_else(|| panic!("template.yaml has no function for the binary {name}"));
        if let Some(route) = source
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("//! `"))
            .and_then(|l| l.strip_suffix('`'))
        {
            let (method, path) = route.split_once(' ').unwrap();
            assert!(
                block.contains(&format!("Method: {method}\n")) && block.contains(&format!("Path: {path}\n")),
                "{name} must route {route}"
            );
        }
        binaries += 1;
    }
    assert_eq!(blocks.len(), binaries, "a function of the template has no binary");
    assert_eq!(
        binaries,
        ops_api::Endpoint::ALL.len() + 5,
        "one function per endpoint and per trigger"
    );
}

#[test]
fn the_table_has_every_index_the_store_queries() {
    let template = template();
    assert_eq!(values_of(&template, "- IndexName: "), ops_infra::aws::INDEXES);
    for index in ops_infra::aws::INDEXES {
        for key in ["PK", "SK"] {
            let attribute = format!("{{ AttributeName: {index}{key}, AttributeType: S }}");
            assert!(template.contains(&attribute), "{attribute} is not defined");
        }
    }
}

#[test]
fn queues_dead_letter_after_as_many_receives_as_the_embedded_ones() {
    let expected = ops_domain::ports::MAX_RECEIVES.to_string();
    assert_eq!(
        values_of(&template(), "maxReceiveCount: "),
        [expected.as_str(), expected.as_str()],
        "submissions and webhooks queues"
    );
}
