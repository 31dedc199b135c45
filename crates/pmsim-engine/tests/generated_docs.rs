//! The parameter reference in `docs/config.md` and `configs/asap-table2.toml` is generated from
//! the parameter table; this test fails when either is stale. `PMSIM_BLESS=1` rewrites them.

use pmsim_engine::Config;
use std::path::PathBuf;

const BEGIN: &str = "<!-- BEGIN GENERATED: parameter table -->\n";
const END: &str = "<!-- END GENERATED -->";
/// The TOML reference keeps its comment header; everything after it is `config show`.
const TOML_BODY_AT: &str = "\n[core]\n";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn check_or_bless(path: PathBuf, current: &str, wanted: String) {
    if current == wanted {
        return;
    }
    if std::env::var_os("PMSIM_BLESS").is_some() {
        std::fs::write(&path, wanted).unwrap();
        return;
    }
    panic!("{} is stale: run PMSIM_BLESS=1 cargo test -p pmsim-engine --test generated_docs", path.display());
}

#[test]
fn generated_docs_are_current() {
    let path = root().join("docs/config.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let a = doc.find(BEGIN).expect("docs/config.md has the BEGIN GENERATED marker") + BEGIN.len();
    let b = a + doc[a..].find(END).expect("docs/config.md has the END GENERATED marker");
    let wanted = format!("{}{}{}", &doc[..a], Config::reference_markdown(), &doc[b..]);
    check_or_bless(path, &doc, wanted);
}

#[test]
fn toml_reference_is_current_and_loads() {
    let path = root().join("configs/asap-table2.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let head = match text.find(TOML_BODY_AT) {
        Some(i) => &text[..i + 1],
        None => text.as_str(),
    };
    let wanted = format!("{head}{}", Config::default().show());
    check_or_bless(path.clone(), &text, wanted.clone());
    assert_eq!(Config::from_toml_str("asap-table2.toml", &wanted).unwrap(), Config::default());
}
