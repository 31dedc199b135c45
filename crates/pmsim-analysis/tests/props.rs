//! Properties that must hold on any trace (random traces, proptest).
//! With coalescing off the models' constraint sets nest (strand ⊆ epoch ⊆ strict), and a
//! coarser tracking granularity only adds conflicts, so critical paths must order accordingly.
//! The binary streaming path must agree with the in-memory one.

use pmsim_analysis::{analyze_file, analyze_trace, Config, Model};
use pmsim_trace::{Event, Kind, Trace, TraceBuilder};
use proptest::prelude::*;

fn event() -> impl Strategy<Value = (usize, u8, u64, u8)> {
    // (thread, kind selector, word index, size selector)
    (0usize..3, 0u8..10, 0u64..24, 0u8..3)
}

fn build(evs: &[(usize, u8, u64, u8)]) -> Trace {
    let mut b = TraceBuilder::new(3);
    b.add_pm_range(0x1_0000_0000, 1 << 30);
    let op = b.label("op");
    // Open operations per thread: an `end` without its `begin` is not a valid trace.
    let mut open = [0u32; 3];
    for &(t, k, w, s) in evs {
        // Words 0..15 persistent (spread over a few lines), 16..23 volatile.
        let addr = if w < 16 { 0x1_0000_0000 + w * 24 } else { 0x5000 + (w - 16) * 8 };
        let size = [8u8, 16, 4][s as usize];
        let addr = addr & !((size as u64).min(8) - 1);
        let addr = if (addr % 64) + size as u64 > 64 { addr & !63 } else { addr };
        let ev = match k {
            0 | 1 => Event::mem(Kind::Store, addr, size),
            2 => Event::mem(Kind::Load, addr, size),
            3 => Event::new(Kind::Ofence),
            4 => Event::new(Kind::Strand),
            5 => Event::mem(Kind::Acquire, addr & !7, 8),
            6 => Event::mem(Kind::Release, addr & !7, 8),
            7 => Event::mem(Kind::Rmw, addr & !7, 8),
            8 => {
                open[t] += 1;
                Event { addr: op as u64, ..Event::new(Kind::Begin) }
            }
            _ if open[t] == 0 => Event::new(Kind::Ofence),
            _ => {
                open[t] -= 1;
                Event { addr: op as u64, ..Event::new(Kind::End) }
            }
        };
        b.push(t, ev, None);
    }
    b.finish()
}

fn cps(t: &Trace, cfg: &Config) -> Vec<u64> {
    analyze_trace(t, &Model::ALL, cfg).unwrap().iter().map(|(_, c)| c.critical_path).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn without_coalescing_strand_le_epoch_le_strict(evs in prop::collection::vec(event(), 0..120), a in 3u32..9, g in 3u32..9) {
        let t = build(&evs);
        let cfg = Config { atomic_bytes: 1 << a, track_bytes: 1 << g, coalesce: false, ..Config::default() };
        let c = cps(&t, &cfg);
        prop_assert!(c[2] <= c[1] && c[1] <= c[0], "strict {} epoch {} strand {}", c[0], c[1], c[2]);
    }

    #[test]
    fn without_coalescing_the_path_never_falls_as_g_grows(evs in prop::collection::vec(event(), 0..120), a in 3u32..9) {
        let t = build(&evs);
        let mut prev = vec![0u64; 3];
        for g in 3..9 {
            let cfg = Config { atomic_bytes: 1 << a, track_bytes: 1 << g, coalesce: false, ..Config::default() };
            let c = cps(&t, &cfg);
            for m in 0..3 {
                prop_assert!(c[m] >= prev[m], "model {m}: G={} gives {} < {}", 1 << g, c[m], prev[m]);
            }
            prev = c;
        }
    }
}

#[test]
fn streaming_a_binary_file_gives_the_in_memory_result() {
    let mut rng = 12345u64;
    let evs: Vec<_> = (0..40_000)
        .map(|_| {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let r = rng >> 33;
            ((r % 3) as usize, ((r >> 2) % 10) as u8, (r >> 6) % 24, ((r >> 11) % 3) as u8)
        })
        .collect();
    let t = build(&evs);
    let path = std::env::temp_dir().join(format!("pmsim-analysis-{}.bin", std::process::id()));
    pmsim_trace::binary::write(std::io::BufWriter::new(std::fs::File::create(&path).unwrap()), &t, true).unwrap();
    let cfg = Config { atomic_bytes: 32, track_bytes: 16, ..Config::default() };
    let from_file = analyze_file(&path, &Model::ALL, &cfg).unwrap();
    std::fs::remove_file(&path).ok();
    let in_mem = analyze_trace(&t, &Model::ALL, &cfg).unwrap();
    assert_eq!(from_file, in_mem);
    assert!(in_mem[0].1.critical_path > in_mem[1].1.critical_path);
}

/// A recorded program's trace is x86 code (design.md §3) whether it is read as text or streamed
/// from a binary file, whose META record names the recorder: a locked instruction after a
/// non-temporal PM store is then a persist barrier (the streamed file was read as neutral).
#[test]
fn a_recorded_programs_binary_trace_is_analysed_as_x86_code_like_its_text() {
    let src = format!(
        "# pmsim trace v1\nthreads 1\n# meta tool={} (test)\nT0 ntstore 0x100000000 8 1\nT0 rmw 0x2000 8 1\nT0 store 0x100000040 8 2\n",
        pmsim_trace::meta::RECORDER
    );
    let t = pmsim_trace::text::parse_str("t", &src).unwrap();
    assert!(t.recorded());
    // One META record before END, as `pmsim trace convert` and `record` write it.
    let text = format!("tool={} (test)", pmsim_trace::meta::RECORDER);
    let bin = pmsim_trace::binary::write_with_meta(Vec::new(), &t, true, &text).unwrap();
    let path = std::env::temp_dir().join(format!("pmsim-analysis-recorded-{}.bin", std::process::id()));
    std::fs::write(&path, &bin).unwrap();
    let cfg = Config::default();
    let from_file = analyze_file(&path, &Model::ALL, &cfg);
    std::fs::remove_file(&path).ok();
    let in_mem = analyze_trace(&t, &Model::ALL, &cfg).unwrap();
    assert_eq!(from_file.unwrap(), in_mem);
    // The rmw orders the ntstore before the later store: two persists in sequence, every model.
    assert!(in_mem.iter().all(|(_, c)| c.critical_path == 2), "{in_mem:?}");
}
