//! Which persistency dialect a trace is written in.
//!
//! Why it exists: a trace orders persists either design-neutrally (`ofence`/`dfence`/`strand`,
//! which every design maps onto its own mechanism, docs/design.md §3) or as a legacy x86
//! program does, with its own `clwb`/`clflushopt`/`clflush` and `sfence`/`mfence` (the tracer's
//! output). A design that runs x86 code natively (the Intel baseline) must then run the program
//! *as written*: it may not add the flushes by which it implements release persistency for
//! design-neutral traces, or every comparison on a traced program would charge the baseline for
//! work real hardware never does.
//!
//! Guarantees: the dialect depends only on which event kinds occur and on whether the trace was
//! recorded from a program (`pmsim trace record`, its metadata). A trace is [`Dialect::X86`]
//! iff it has no `ofence`, `dfence` or `strand` and either at least one flush or
//! `sfence`/`mfence`, or was recorded from a program (a program that never flushes is still
//! x86 code: `baseline` must not add flushes to it, and lint must name its stores); everything
//! else (a mixed trace included) is [`Dialect::Neutral`], the conservative reading.

use crate::event::Kind;
use crate::Trace;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dialect {
    /// `ofence`/`dfence`/`strand` (or no ordering at all): each design maps them.
    #[default]
    Neutral,
    /// Flushes and x86 fences only: a legacy x86 program, checked against x86 persistency.
    X86,
}

/// Accumulates the evidence event by event (for readers that stream).
#[derive(Clone, Copy, Debug, Default)]
pub struct DialectScan {
    x86: bool,
    neutral: bool,
    recorded: bool,
}

impl DialectScan {
    #[inline]
    pub fn see(&mut self, kind: Kind) {
        match kind {
            Kind::Clwb | Kind::ClflushOpt | Kind::Clflush | Kind::Sfence | Kind::Mfence => self.x86 = true,
            Kind::Ofence | Kind::Dfence | Kind::Strand => self.neutral = true,
            _ => {}
        }
    }

    /// The trace was recorded from a program (its metadata says so).
    pub fn recorded_program(&mut self) {
        self.recorded = true;
    }

    /// Whether an `ofence`, `dfence` or `strand` was seen.
    pub fn has_neutral(&self) -> bool {
        self.neutral
    }

    pub fn dialect(&self) -> Dialect {
        if (self.x86 || self.recorded) && !self.neutral {
            Dialect::X86
        } else {
            Dialect::Neutral
        }
    }
}

impl Trace {
    /// The trace's dialect (see the module doc).
    pub fn dialect(&self) -> Dialect {
        let mut s = DialectScan { recorded: self.recorded(), ..DialectScan::default() };
        for t in &self.threads {
            for e in &t.events {
                s.see(e.kind);
                if s.neutral {
                    return Dialect::Neutral;
                }
            }
        }
        s.dialect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text;

    fn dialect(body: &str) -> Dialect {
        let src = format!("# pmsim trace v1\nthreads 2\n{body}");
        text::parse_str("t", &src).expect("valid trace").dialect()
    }

    #[test]
    fn flushes_and_x86_fences_alone_make_an_x86_trace() {
        assert_eq!(dialect("T0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 sfence\n"), Dialect::X86);
        assert_eq!(dialect("T1 store 0x100000000 8 1\nT1 mfence\n"), Dialect::X86);
        assert_eq!(dialect("T0 clflush 0x100000000\nT0 rmw 0x2000 8 1\n"), Dialect::X86);
    }

    #[test]
    fn any_design_neutral_barrier_makes_it_neutral() {
        assert_eq!(dialect("T0 store 0x100000000 8 1\nT0 ofence\n"), Dialect::Neutral);
        // Mixed: the neutral reading (the design's own mapping) is the conservative one.
        assert_eq!(dialect("T0 clflush 0x100000000\nT1 dfence\n"), Dialect::Neutral);
        assert_eq!(dialect("T0 clwb 0x100000000\nT0 sfence\nT1 strand\n"), Dialect::Neutral);
        // No ordering at all: nothing to run "as written".
        assert_eq!(dialect("T0 store 0x100000000 8 1\nT1 release 0x2000\n"), Dialect::Neutral);
    }

    #[test]
    fn a_recorded_program_is_x86_code_even_without_a_flush() {
        let recorded = format!("# meta tool={} (clang pass plugin + runtime)\n", crate::meta::RECORDER);
        let no_order = "T0 store 0x100000000 8 1\nT1 release 0x2000\n";
        assert_eq!(dialect(&format!("{recorded}{no_order}")), Dialect::X86);
        assert_eq!(dialect(&format!("# meta tool=my generator\n{no_order}")), Dialect::Neutral);
        // Its own design-neutral markers (pmsim_ofence()) still make it neutral.
        assert_eq!(dialect(&format!("{recorded}T0 store 0x100000000 8 1\nT0 ofence\n")), Dialect::Neutral);
        assert!(text::parse_str("t", &format!("# pmsim trace v1\nthreads 2\n{recorded}{no_order}"))
            .unwrap()
            .recorded());
    }
}
