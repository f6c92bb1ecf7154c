//! Puts two things into the build:
//! - the OpenAPI document deflated: 330 KB of JSON that every API function's bootstrap would
//!   otherwise carry whole, about 16 KB deflated (`ops_api::openapi` inflates it at its first
//!   call);
//! - the console's page with what it embeds (uPlot's script and style sheet, as
//!   `console/package-lock.json` pins them) written into it where it names them, so the browser
//!   fetches nothing from anywhere but the API.
use std::path::Path;

fn main() {
    let out = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let out = Path::new(&out);
    println!("cargo::rerun-if-changed=openapi.json");
    let document = std::fs::read("openapi.json").expect("functions/api/openapi.json is readable");
    let deflated = miniz_oxide::deflate::compress_to_vec(&document, 10);
    std::fs::write(out.join("openapi.json.deflated"), deflated).expect("OUT_DIR is writable");

    let read = |path: &str| {
        println!("cargo::rerun-if-changed={path}");
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{path}: {error}"))
    };
    let mut page = read("console/console.html");
    for (marker, element, path) in [
        ("<!-- uPlot's style sheet -->", "style", "console/vendor/uPlot.min.css"),
        ("<!-- uPlot's script -->", "script", "console/vendor/uPlot.iife.min.js"),
    ] {
        assert!(page.contains(marker), "console.html names {path} by {marker}");
        let embedded = read(path);
        assert!(
            !embedded.contains(&format!("</{element}")),
            "{path} cannot close its own element"
        );
        page = page.replace(marker, &format!("<{element}>{}</{element}>", embedded.trim_end()));
    }
    std::fs::write(out.join("console.html"), page).expect("OUT_DIR is writable");
}
