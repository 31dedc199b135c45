//! Every deliberately broken design variant is caught by the checker (or the application's
//! recovery) within 1,000 random crashes on some workload. A variant that cannot be caught would
//! mean the checker or the workloads are too weak.

mod common;
use common::{crash_workload, describe};

fn caught(design: &str, workloads: &[&str]) {
    for w in workloads {
        let r = crash_workload(w, 100, design, 1000, 1);
        if !r.ok() {
            eprintln!("{design} caught on {w}: {}", describe(&r));
            return;
        }
    }
    panic!("{design} survived 1,000 random crashes on each of {workloads:?}");
}

#[test]
fn baseline_without_the_sfence_stall_is_caught() {
    caught("broken-baseline-no-sfence-stall", &["array", "dash-eh"]);
}

#[test]
fn asap_without_undo_records_is_caught() {
    caught("broken-asap-rp-no-undo", &["bandwidth", "cceh"]);
}

#[test]
fn asap_without_delay_records_is_caught() {
    caught("broken-asap-ep-no-delay", &["dash-eh", "cceh"]);
}

#[test]
fn asap_committing_before_the_commit_acks_is_caught() {
    caught("broken-asap-rp-commit-before-ack", &["dash-eh", "cceh", "array"]);
}

#[test]
fn broi_letting_a_request_pass_its_barrier_is_caught() {
    // On banked NVM, where BROI interleaves epochs over banks (without banks its picks enter the
    // WPQ in arrival order, so a Next-SET pick rarely overtakes anything).
    let mut banked = pmsim_engine::Config::default();
    banked.set("pm.model", "banked").unwrap();
    for w in ["array", "dash-eh", "cceh"] {
        let r = common::crash_workload_on(w, 100, "broken-broi-cross-barrier", 1000, 1, banked.clone());
        if !r.ok() {
            eprintln!("caught on {w}: {}", describe(&r));
            return;
        }
    }
    panic!("broken-broi-cross-barrier survived 1,000 random crashes on banked NVM");
}

#[test]
fn hops_without_the_cross_thread_wait_is_caught() {
    caught("broken-hops-ep-no-cross-thread-wait", &["dash-eh", "cceh"]);
}

#[test]
fn broken_variants_need_the_flag() {
    let e =
        pmsim_engine::design::build("broken-asap-rp-no-undo", &pmsim_engine::Config::default(), false).err().unwrap();
    assert!(e.contains("--allow-broken-designs"), "{e}");
}
