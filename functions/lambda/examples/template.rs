//! Writes the API's functions into `template.yaml` as the endpoint list makes them
//! (`ops_lambda::template`); with `--check`, only says whether they differ.

fn main() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../template.yaml");
    let template = std::fs::read_to_string(&path).expect("template.yaml");
    let made = ops_lambda::template::with_api_functions(&template).unwrap_or_else(|e| panic!("{e}"));
    if made == template {
        println!("template.yaml: the API's functions are as the endpoint list makes them");
    } else if std::env::args().any(|arg| arg == "--check") {
        eprintln!("template.yaml: the API's functions differ from the endpoint list's; run without --check");
        std::process::exit(1);
    } else {
        std::fs::write(&path, made).expect("template.yaml written");
        println!("template.yaml: the API's functions written");
    }
}
