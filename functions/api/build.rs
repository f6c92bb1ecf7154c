//! Deflates the OpenAPI document into the build: 330 KB of JSON that every API function's
//! bootstrap would otherwise carry whole, about 16 KB deflated.
//! `ops_api::openapi` inflates it at its first call.
fn main() {
    println!("cargo::rerun-if-changed=openapi.json");
    let document = std::fs::read("openapi.json").expect("functions/api/openapi.json is readable");
    let deflated = miniz_oxide::deflate::compress_to_vec(&document, 10);
    let out =
        std::path::Path::new(&std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("openapi.json.deflated");
    std::fs::write(out, deflated).expect("OUT_DIR is writable");
}
