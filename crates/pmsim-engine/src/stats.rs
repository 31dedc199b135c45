//! Run statistics as JSON with stable names (docs/design.md §7; documented in docs/stats.md).
//!
//! Field names never change meaning; new fields may be added. Times are reported in ns (and the
//! raw ps where exactness matters), cycles at the core clock. The ASAP artifact's names are
//! provided under `artifact` so existing scripts map across.

use crate::machine::StallCause;
use crate::sim::Simulator;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize)]
pub struct CoreReport {
    pub instructions: u64,
    pub events: u64,
    pub loads: u64,
    pub stores: u64,
    pub pm_stores: u64,
    pub cycles: u64,
    pub stall_cycles: BTreeMap<&'static str, u64>,
    pub load_latency_avg_ns: f64,
    pub operations: u64,
    pub finish_ns: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct McReport {
    pub pm_reads: u64,
    pub pm_writes: u64,
    pub wpq_read_hits: u64,
    pub xpbuffer_read_hits: u64,
    pub wpq_coalesced: u64,
    pub wpq_full_waits: u64,
    pub wpq_occupancy_avg: f64,
    pub wpq_occupancy_max: usize,
    pub read_bandwidth_gbps: f64,
    pub write_bandwidth_gbps: f64,
    /// Banked model only (`pm.model = "banked"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub banks: Option<BankReport>,
}

/// The banked model's statistics for one MC (docs/design.md §9).
#[derive(Clone, Debug, Serialize)]
pub struct BankReport {
    /// Average banks busy while any bank is busy.
    pub blp: f64,
    pub row_hits: u64,
    pub row_conflicts: u64,
    pub row_hit_rate: f64,
    /// Percentage of accesses that waited because their bank was busy with another.
    pub bank_conflict_stall_pct: f64,
    /// Reads + writes at the media, GB/s over the execution time.
    pub memory_throughput_gbps: f64,
    pub per_bank: Vec<crate::mem::banked::BankStats>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CacheReport {
    pub l1_hits: u64,
    pub l1_misses: u64,
    pub l2_hits: u64,
    pub l2_misses: u64,
    pub llc_hits: u64,
    pub llc_misses: u64,
    pub forwards: u64,
    pub invalidations: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunStats {
    pub pmsim_version: &'static str,
    pub design: String,
    pub promise: &'static str,
    pub threads: usize,
    /// Execution time: when the last thread retired its last event.
    pub sim_time_ps: u64,
    pub sim_time_ns: f64,
    /// When the last persist reached NVM (>= sim_time).
    pub drain_time_ns: f64,
    pub events: u64,
    pub instructions: u64,
    pub operations: u64,
    /// Region of interest: from the first `begin` of any thread to the last `end` (the whole
    /// run for a trace without operations). A workload's load phase and a program's setup and
    /// teardown lie outside it; throughput and speedups are measured over it.
    pub roi_start_ns: f64,
    pub roi_time_ns: f64,
    /// operations / roi_time.
    pub ops_per_sec: f64,
    /// The region of interest in whole picoseconds, for exact quotients (`ops_per_sec` is
    /// rounded to 3 decimals); not in the JSON.
    #[serde(skip)]
    pub roi_ps: u64,
    pub op_latency_avg_ns: f64,
    pub op_latency_max_ns: f64,
    pub pm_stores: u64,
    pub pm_reads: u64,
    pub pm_writes: u64,
    pub stall_cycles: BTreeMap<&'static str, u64>,
    pub cores: Vec<CoreReport>,
    pub mcs: Vec<McReport>,
    pub caches: CacheReport,
    pub design_stats: BTreeMap<String, f64>,
    /// The ASAP artifact's statistic names, mapped onto pmsim's.
    pub artifact: BTreeMap<&'static str, f64>,
    /// Engine events processed (the simulator's own work, for events/s benchmarks).
    pub engine_events: u64,
    /// Remote persistence over RDMA (all zero when the trace has no client threads).
    pub net: crate::net::NetReport,
}

pub(crate) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

impl RunStats {
    pub fn collect(sim: &Simulator) -> RunStats {
        let m = &sim.m;
        let cyc = m.cycle_ps.max(1);
        let exec = sim.exec_time_ps();
        let end = m.now.max(exec);
        let mut stall_total: BTreeMap<&'static str, u64> = StallCause::ALL.iter().map(|c| (c.name(), 0)).collect();
        let cores: Vec<CoreReport> = m
            .cores
            .iter()
            .take(sim.threads)
            .map(|c| {
                let s = &c.stats;
                let stall_cycles: BTreeMap<&'static str, u64> =
                    StallCause::ALL.iter().map(|k| (k.name(), s.stall_ps[*k as usize] / cyc)).collect();
                for (k, v) in &stall_cycles {
                    *stall_total.entry(k).or_default() += v;
                }
                CoreReport {
                    instructions: s.instructions,
                    events: s.events,
                    loads: s.loads,
                    stores: s.stores,
                    pm_stores: s.pm_stores,
                    cycles: s.finish_ps / cyc,
                    stall_cycles,
                    load_latency_avg_ns: round3(if s.loads > 0 {
                        s.load_latency_ps as f64 / s.loads as f64 / 1000.0
                    } else {
                        0.0
                    }),
                    operations: s.ops,
                    finish_ns: round3(s.finish_ps as f64 / 1000.0),
                }
            })
            .collect();
        let secs = exec as f64 * 1e-12;
        let first_begin = m.cores.iter().filter_map(|c| c.stats.first_begin_ps).min();
        let last_end = m.cores.iter().map(|c| c.stats.last_end_ps).max().unwrap_or(0);
        let (roi_start, roi_end) = match first_begin {
            Some(b) if last_end > b => (b, last_end),
            _ => (0, exec),
        };
        let roi_secs = (roi_end - roi_start) as f64 * 1e-12;
        let mcs: Vec<McReport> = m
            .mcs
            .iter()
            .map(|mc| McReport {
                pm_reads: mc.stats.pm_reads,
                pm_writes: mc.stats.pm_writes,
                wpq_read_hits: mc.stats.wpq_read_hits,
                xpbuffer_read_hits: mc.stats.xpbuffer_read_hits,
                wpq_coalesced: mc.stats.wpq_coalesced,
                wpq_full_waits: mc.stats.wpq_full_waits,
                wpq_occupancy_avg: round3(mc.occupancy_avg(end)),
                wpq_occupancy_max: mc.stats.wpq_occupancy_max,
                read_bandwidth_gbps: round3(if secs > 0.0 {
                    mc.stats.pm_reads as f64 * 64.0 / secs / 1e9
                } else {
                    0.0
                }),
                write_bandwidth_gbps: round3(if secs > 0.0 {
                    mc.stats.pm_writes as f64 * 64.0 / secs / 1e9
                } else {
                    0.0
                }),
                banks: mc.banks.as_ref().map(|b| {
                    let hits: u64 = b.stats.iter().map(|s| s.row_hits).sum();
                    let conf: u64 = b.stats.iter().map(|s| s.row_conflicts).sum();
                    BankReport {
                        blp: round3(b.blp()),
                        row_hits: hits,
                        row_conflicts: conf,
                        row_hit_rate: round3(if hits + conf > 0 { hits as f64 / (hits + conf) as f64 } else { 0.0 }),
                        bank_conflict_stall_pct: round3(if b.accesses > 0 {
                            100.0 * b.bank_waits as f64 / b.accesses as f64
                        } else {
                            0.0
                        }),
                        memory_throughput_gbps: round3(if secs > 0.0 {
                            (mc.stats.pm_reads + mc.stats.pm_writes) as f64 * 64.0 / secs / 1e9
                        } else {
                            0.0
                        }),
                        per_bank: b.stats.clone(),
                    }
                }),
            })
            .collect();
        let ops: u64 = m.cores.iter().map(|c| c.stats.ops).sum();
        let lat_sum: u64 = m.cores.iter().map(|c| c.stats.op_latency_ps).sum();
        let lat_max: u64 = m.cores.iter().map(|c| c.stats.op_latency_max_ps).max().unwrap_or(0);
        let h = &m.hier;
        let caches = CacheReport {
            l1_hits: h.l1.iter().map(|c| c.hits).sum(),
            l1_misses: h.l1.iter().map(|c| c.misses).sum(),
            l2_hits: h.l2.iter().map(|c| c.hits).sum(),
            l2_misses: h.l2.iter().map(|c| c.misses).sum(),
            llc_hits: h.llc.hits,
            llc_misses: h.llc.misses,
            forwards: h.dir.forwards,
            invalidations: h.dir.invalidations,
        };
        let mut design_stats = BTreeMap::new();
        sim.design.stats(m, &mut design_stats);
        for v in design_stats.values_mut() {
            *v = round3(*v);
        }
        let pm_stores: u64 = cores.iter().map(|c| c.pm_stores).sum();
        let mut artifact = BTreeMap::new();
        let ds = |k: &str| design_stats.get(k).copied().unwrap_or(0.0);
        artifact.insert("cyclesBlocked", ds("flush_stall_cycles"));
        artifact.insert("cyclesStalled", stall_total.get("pb_full").copied().unwrap_or(0) as f64);
        artifact.insert("dfenceStalled", stall_total.get("dfence").copied().unwrap_or(0) as f64);
        artifact.insert("entriesInserted", ds("pb_inserts"));
        artifact.insert("interTEpochConflict", ds("cross_thread_deps"));
        artifact.insert("totSpecWrites", ds("early_flushes"));
        artifact.insert("totalUndo", ds("undo_records"));
        RunStats {
            pmsim_version: env!("CARGO_PKG_VERSION"),
            design: sim.design.name().to_string(),
            promise: sim.design.promise().name(),
            threads: sim.threads,
            sim_time_ps: exec,
            sim_time_ns: round3(exec as f64 / 1000.0),
            drain_time_ns: round3(end as f64 / 1000.0),
            events: cores.iter().map(|c| c.events).sum(),
            instructions: cores.iter().map(|c| c.instructions).sum(),
            operations: ops,
            roi_start_ns: round3(roi_start as f64 / 1000.0),
            roi_time_ns: round3((roi_end - roi_start) as f64 / 1000.0),
            ops_per_sec: round3(if roi_secs > 0.0 { ops as f64 / roi_secs } else { 0.0 }),
            roi_ps: roi_end - roi_start,
            op_latency_avg_ns: round3(if ops > 0 { lat_sum as f64 / ops as f64 / 1000.0 } else { 0.0 }),
            op_latency_max_ns: round3(lat_max as f64 / 1000.0),
            pm_stores,
            pm_reads: mcs.iter().map(|m| m.pm_reads).sum(),
            pm_writes: mcs.iter().map(|m| m.pm_writes).sum(),
            stall_cycles: stall_total,
            cores,
            mcs,
            caches,
            design_stats,
            artifact,
            engine_events: m.events_processed,
            net: sim.net.report(),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}
