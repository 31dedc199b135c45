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

/// T0 fills one epoch with 30 lines of MC 0, then, each after an ofence, stores one more and
/// releases a lock; T1 acquires it and, after an ofence, stores one line of MC 1 (EP orders the
/// store after T0's second epoch through the lock's conflict). T0's second epoch is the
/// in-order controller's second global epoch, while T1's store joins the first, still draining
/// on slow NVM: only the core's dependency wait keeps it behind T0's second epoch.
#[test]
fn delegated_without_the_dependency_wait_is_caught() {
    use pmsim_crash::{run, Instants, Request};
    use std::sync::Arc;
    let mut text = "# pmsim trace v1\nthreads 2\n".to_string();
    for i in 0..30u64 {
        text += &format!("T0 store {:#x} 8 {}\n", 0x1_0000_0000u64 + 0x40 * i, i + 1);
    }
    text += "T0 ofence\nT0 store 0x100000800 8 77\nT0 ofence\nT0 release 0x100004000 8 1\n\
             T1 acquire 0x100004000\nT1 ofence\nT1 store 0x100001000 8 ff\nT1 dfence\n";
    let trace = Arc::new(pmsim_trace::text::parse_str("dep.trace", &text).unwrap());
    let mut slow = pmsim_engine::Config::default();
    slow.set("mc.wpq_entries", "1").unwrap();
    slow.set("pm.write_gbps", "0.2").unwrap();
    let check = |design: &str| {
        let req = Request {
            trace: trace.clone(),
            design: design.to_string(),
            allow_broken: true,
            config: slow.clone(),
            instants: Instants::Every,
            model: None,
            recovery: None,
            replay_input: "--trace dep.trace".into(),
            max_failures: 1,
        };
        run(&req).unwrap()
    };
    for d in ["delegated", "broi"] {
        let r = check(d);
        assert!(r.ok(), "{d}: {:?}", r.failures.first().map(|f| &f.verdict));
    }
    let r = check("broken-delegated-no-dep-wait");
    assert!(!r.ok(), "broken-delegated-no-dep-wait passed {} images", r.images);
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

#[test]
fn eadr_and_bbb_without_their_battery_are_caught() {
    caught("broken-eadr-no-battery", &["array", "dash-eh"]);
    caught("broken-bbb-volatile", &["array", "dash-eh"]);
}

/// Tester I's shape: stores separated by ofences, then a long computation and no dfence. Strict
/// persistency allows every store to be missing (any prefix of the persist order may be), so a
/// battery-less eADR or a volatile BBB passes a check against the model alone; the promise
/// "every performed store survives" catches both, and the real designs keep it.
#[test]
fn every_performed_store_must_survive_under_eadr_and_bbb() {
    use pmsim_crash::{run, Instants, Request};
    use std::sync::Arc;
    let mut text = "# pmsim trace v1\nthreads 1\n".to_string();
    for i in 0..8u64 {
        text += &format!("T0 store {:#x} 8 {}\nT0 ofence\n", 0x1_0000_0000u64 + 0x40 * i, i + 1);
    }
    text += "T0 compute 20000\n";
    let trace = Arc::new(pmsim_trace::text::parse_str("b1.trace", &text).unwrap());
    let check = |design: &str, model: Option<pmsim_check::Model>| {
        let req = Request {
            trace: trace.clone(),
            design: design.to_string(),
            allow_broken: true,
            config: pmsim_engine::Config::default(),
            instants: Instants::Every,
            model,
            recovery: None,
            replay_input: "--trace b1.trace".into(),
            max_failures: 1,
        };
        run(&req).unwrap()
    };
    for d in ["eadr", "bbb"] {
        let r = check(d, None);
        assert!(r.ok(), "{d}: {:?}", r.failures.first().map(|f| &f.verdict));
    }
    for d in ["broken-eadr-no-battery", "broken-bbb-volatile"] {
        let strict_only = check(d, Some(pmsim_check::Model::Strict));
        assert!(strict_only.ok(), "{d}: strict persistency alone now catches it; the test's premise changed");
        let r = check(d, None);
        assert!(!r.ok(), "{d} passed its design's promise");
        let v = r.failures[0].verdict.as_ref().unwrap();
        let text = v.violations[0].to_string();
        assert!(text.contains("every performed store survives"), "{text}");
    }
}
