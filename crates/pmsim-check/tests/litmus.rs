//! Runs the litmus suite (`tests/litmus/*.trace` at the repo root): every hand-derived
//! expectation must match the checker's verdict, for every model it names, in the run where
//! events perform in global order.

use pmsim_check::litmus::global_order_record;
use pmsim_check::{parse_litmus, Checker, Model, Outcome};
use std::path::PathBuf;

fn suite() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/litmus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "trace"))
        .collect();
    files.sort();
    files
}

#[test]
fn litmus_suite_matches_hand_derived_expectations() {
    let files = suite();
    assert!(files.len() >= 20, "expected at least 20 litmus files, found {}", files.len());
    let mut failures = Vec::new();
    let mut checked = 0;
    for f in &files {
        let lit = parse_litmus(f).unwrap_or_else(|e| panic!("{e}"));
        assert!(!lit.name.is_empty() && !lit.about.is_empty(), "{}: needs #@ name and #@ about", lit.path);
        let rec = global_order_record(&lit.trace);
        for model in Model::ALL {
            let ck = Checker::new(&lit.trace, &rec, model).unwrap_or_else(|e| panic!("{}: {e}", lit.path));
            let mine: Vec<_> = lit.expectations.iter().filter(|x| x.models.contains(&model)).collect();
            assert!(mine.iter().any(|x| x.outcome == Outcome::Allow), "{}: no allowed image for {model}", lit.path);
            for x in mine {
                let v = ck.check(&x.image(), x.instant(&lit.trace));
                let got = match (v.consistent, v.durable) {
                    (false, _) => Outcome::Forbid,
                    (true, false) => Outcome::NonDurable,
                    (true, true) => Outcome::Allow,
                };
                checked += 1;
                if got != x.outcome {
                    let why: Vec<String> = v.violations.iter().map(|v| v.to_string()).collect();
                    failures.push(format!(
                        "{}:{} [{model}] expected {:?}, checker says {got:?} ({}) {why:?}",
                        lit.path, x.line, x.outcome, x.reason
                    ));
                }
                if got != Outcome::Allow {
                    assert!(!v.violations.is_empty(), "{}:{}: failing verdict without violations", lit.path, x.line);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {checked} expectations failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_model_has_forbidden_images_in_the_suite() {
    for model in Model::ALL {
        let n: usize = suite()
            .iter()
            .map(|f| parse_litmus(f).unwrap_or_else(|e| panic!("{e}")))
            .map(|l| {
                l.expectations.iter().filter(|x| x.models.contains(&model) && x.outcome == Outcome::Forbid).count()
            })
            .sum();
        assert!(n >= 20, "{model}: only {n} forbidden images");
    }
}

#[test]
fn litmus_syntax_errors_name_the_line() {
    use pmsim_check::litmus::parse_litmus_str;
    let base = "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 load 0x100000000 8\n";
    let e = parse_litmus_str("x.trace", &format!("{base}#@ expect ep allow g1 -- a load\n")).unwrap_err();
    assert_eq!(e.to_string(), "x.trace:5: 'g1': g1 is a 'load', not a store");
    let e = parse_litmus_str("x.trace", &format!("{base}#@ expect xp allow g0 -- r\n")).unwrap_err();
    assert!(e.to_string().starts_with("x.trace:5: unknown model 'xp'"), "{e}");
    let e = parse_litmus_str("x.trace", &format!("{base}#@ expect ep allow g0\n")).unwrap_err();
    assert!(e.to_string().contains("-- REASON"), "{e}");
    let e = parse_litmus_str("x.trace", base).unwrap_err();
    assert!(e.to_string().contains("no '#@ expect' lines"), "{e}");
    let ok = parse_litmus_str("x.trace", &format!("{base}#@ expect all forbid at=g0 g0@0x100000000 -- r\n")).unwrap();
    assert_eq!(ok.expectations[0].words, vec![(0x1_0000_0000, 0)]);
    assert_eq!(ok.expectations[0].at, Some(0));
    assert_eq!(ok.expectations[0].models.len(), 3);
}
