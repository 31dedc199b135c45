//! Remote persistence over RDMA (docs/design.md §9, the seed's §III, §V and §VII-B): client nodes
//! send barrier regions (`rdma_pwrite`) to the simulated machine, which is the NVM server.
//!
//! Why it exists: the seed's claim is that synchronous network persistence spends its time in
//! RDMA round trips, and that buffered strict persistence (BSP) hides them by letting regions
//! stream while the server keeps them in order. That can only be measured if the round trip is
//! made of parts: here every region is packetised (MTU, per-packet headers), serialised on the
//! client's link and on the server's shared port (bandwidth, contention), delayed by wire, switch
//! and NIC latency, written into the server's LLC (DDIO on), drained line by line by the server's
//! remote persist buffer into the same memory controllers (WPQs, media bandwidth) the server's
//! local threads use, and acknowledged by the advanced NIC only once every line of the region is
//! in a WPQ (the ADR persistence domain) — the persist ACK then travels back.
//!
//! Who is who: a trace thread that issues `rdma_pwrite`/`rdma_wait` is a trace-driven client, its
//! own client node with its own NIC and link (its other events may only be `compute` and
//! `begin`/`end`: the text reader enforces it). Node 0 is the server: the machine the engine
//! simulates, with the trace's PM ranges. Other threads are the server's local threads.
//!
//! Guarantee (checked by crash simulation): every client's regions become durable in the order
//! it posted them. The server's remote BROI queue has `net.channels` entries; a client uses
//! channel `client mod channels`, and a channel's regions are drained by its remote persist
//! buffer strictly one after the other (a region's lines go to the MCs only once the previous
//! region's lines have all been accepted), whatever the strategy. `sync` and `bsp` differ only
//! at the client: `sync` blocks after each `rdma_pwrite` until its persist ACK is back; `bsp`
//! keeps posting (up to `net.send_queue` regions in flight) and blocks only at `rdma_wait`.
//! The test-only strategy `broken-bsp-unordered` drains the newest arrived region first, so its
//! regions can become durable out of order; the checker must catch it.

mod link;
mod nic;

pub use link::Link;
pub use nic::NicPipe;

use crate::config::{ns, Config};
use crate::design::{Design, RemoteSubmit};
use crate::machine::{DesignEv, Machine, StallCause};
use crate::mem::nvm::{word_index, LineData};
use pmsim_trace::{Event, Kind, LINE_BYTES};
use serde::Serialize;
use std::collections::VecDeque;

/// Design-event tags from here up belong to the network model (designs use small tags).
pub const TAG_BASE: u16 = 0xF000;
/// A packet's payload has landed in the server's LLC. core = client, arg = region << 16 | packet.
const TAG_PACKET: u16 = TAG_BASE;
/// A line leaves the remote persist buffer and reaches its MC. core = channel, arg = region << 16 | line.
const TAG_TO_MC: u16 = TAG_BASE + 1;
/// The MC accepted a line into its WPQ. core = channel, arg = region.
const TAG_WPQ_ACK: u16 = TAG_BASE + 2;
/// A persist ACK reached the client. core = client, arg = region.
const TAG_PERSIST_ACK: u16 = TAG_BASE + 3;
/// The design's remote entry for a channel freed a unit after refusing a line. core = channel.
const TAG_ROOM: u16 = TAG_BASE + 4;

/// Where remote lines enter the server's memory system when the design has no remote queue: the
/// line's MC, whose WPQ it shares with the local threads' writes (through the design's MC-side
/// state, [`Design::write_remote`]); `accepted` comes back (one on-chip hop) once the WPQ holds
/// it. Designs with a remote BROI queue (`delegated`, `broi`) take the lines through
/// [`Design::submit_remote`] instead ([`Net::offer_lines`]).
fn to_memory(m: &mut Machine, design: &mut dyn Design, line: LineData, accepted: DesignEv) {
    let mc = m.mc_of(line.line);
    design.write_remote(m, mc, line, accepted);
}

/// Whether a queued design event is the network model's.
#[inline]
pub fn is_net(ev: &DesignEv) -> bool {
    ev.tag >= TAG_BASE
}

/// How clients wait for remote durability (`net.strategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    Sync,
    Bsp,
    /// TEST ONLY: the server drains regions newest first (violates region order).
    BrokenUnordered,
}

pub const STRATEGIES: &[(&str, Strategy)] =
    &[("sync", Strategy::Sync), ("bsp", Strategy::Bsp), ("broken-bsp-unordered", Strategy::BrokenUnordered)];

impl Strategy {
    pub fn parse(name: &str) -> Option<Strategy> {
        STRATEGIES.iter().find(|(n, _)| *n == name).map(|&(_, s)| s)
    }
}

/// Refuses the test-only strategy unless broken variants are allowed (called by `design::build`).
pub fn check_allowed(cfg: &Config, allow_broken: bool) -> Result<(), String> {
    if Strategy::parse(&cfg.net.strategy) == Some(Strategy::BrokenUnordered) && !allow_broken {
        return Err(format!("net.strategy '{}' is a broken variant (needs --allow-broken-designs)", cfg.net.strategy));
    }
    Ok(())
}

/// One `rdma_pwrite` in flight or done.
#[derive(Clone, Copy, Debug)]
struct Region {
    gid: u64,
    client: u16,
    channel: u16,
    addr: u64,
    len: u64,
    lines: u32,
    bytes_arrived: u64,
    issued: u32,
    accepted: u32,
    posted_at: u64,
    /// When its last packet landed in the LLC.
    arrived_at: u64,
    /// When its persist ACK reached the client (`u64::MAX` before).
    acked_at: u64,
    done: bool,
}

impl Region {
    fn first_line(&self) -> u64 {
        self.addr & !(LINE_BYTES - 1)
    }

    /// Line `idx` of the region with the words it writes.
    fn line_data(&self, idx: u64) -> LineData {
        let line = self.first_line() + idx * LINE_BYTES;
        let mut d = LineData::new(line);
        let lo = self.addr.max(line);
        let hi = (self.addr + self.len).min(line + LINE_BYTES);
        let mut w = lo & !7;
        while w < hi {
            d.set(word_index(w), self.gid);
            w += 8;
        }
        d
    }

    /// Lines whose bytes of the region have all arrived (packets arrive in order).
    fn ready_lines(&self) -> u32 {
        if self.bytes_arrived >= self.len {
            self.lines
        } else {
            ((self.addr + self.bytes_arrived - self.first_line()) / LINE_BYTES) as u32
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    None,
    /// For a send-queue slot (bsp, queue full).
    Slot,
    /// For every posted region to be durable (sync after each post, `rdma_wait`).
    All,
}

struct Client {
    core: usize,
    tx: Link,
    /// The client NIC's send pipeline (work requests) and receive pipeline (persist ACKs).
    nic_tx: NicPipe,
    nic_rx: NicPipe,
    outstanding: u32,
    wait: Wait,
}

#[derive(Default)]
struct Channel {
    /// Regions in arrival order (first packet), not yet durable.
    queue: VecDeque<u32>,
    /// Lines issued to the MCs and not yet accepted.
    in_flight: usize,
    /// (region, line) that reached the MC side and wait for room in the design's remote BROI
    /// entry, in the order the remote persist buffer sent them.
    at_mc: VecDeque<(u32, u32)>,
}

/// Network statistics (`net` in the run's JSON; docs/stats.md).
#[derive(Clone, Debug, Default, Serialize)]
pub struct NetReport {
    pub strategy: String,
    pub clients: u64,
    pub regions: u64,
    pub region_bytes: u64,
    pub packets: u64,
    pub wire_bytes: u64,
    pub persist_acks: u64,
    /// Mean time from posting a region to its persist ACK at the client.
    pub region_latency_avg_ns: f64,
    /// Mean time from a region's last byte landing in the server's LLC to its last line in a WPQ.
    pub server_persist_avg_ns: f64,
    /// Share of region latency spent outside the server's persist (NICs, wires, switch, ACK).
    pub round_trip_share: f64,
    /// Lines the remote persist buffer moved from the LLC to the MCs.
    pub rpb_lines_issued: u64,
}

/// The network, the clients' NICs and the server's NIC, remote persist buffer and BROI queue.
pub struct Net {
    pub strategy: Strategy,
    clients: Vec<Client>,
    client_of_core: Vec<Option<u16>>,
    regions: Vec<Region>,
    channels: Vec<Channel>,
    /// The server port toward the server (shared by every client) and back.
    server_rx: Link,
    server_tx: Link,
    /// The server NIC's receive (packets into the LLC) and send (persist ACKs) pipelines.
    server_nic_rx: NicPipe,
    server_nic_tx: NicPipe,
    /// Initiation interval of every NIC pipeline (1 / message rate).
    msg_ps: u64,
    gbps: f64,
    latency_ps: u64,
    nic_ps: u64,
    post_ps: u64,
    llc_ps: u64,
    mtu: u64,
    overhead: u64,
    send_queue: u32,
    rpb_entries: usize,
    /// Regions not yet durable.
    pending: u64,
    latency_sum_ps: u64,
    server_sum_ps: u64,
    acks: u64,
}

impl Net {
    pub fn new(cfg: &Config) -> Net {
        let c = &cfg.net;
        Net {
            strategy: Strategy::parse(&c.strategy).unwrap_or(Strategy::Sync),
            clients: Vec::new(),
            client_of_core: Vec::new(),
            regions: Vec::new(),
            channels: (0..c.channels).map(|_| Channel::default()).collect(),
            server_rx: Link::new(c.link_gbps),
            server_tx: Link::new(c.link_gbps),
            server_nic_rx: NicPipe::default(),
            server_nic_tx: NicPipe::default(),
            msg_ps: ns(c.nic_msg_ns),
            gbps: c.link_gbps,
            latency_ps: ns(c.link_latency_ns),
            nic_ps: ns(c.nic_ns),
            post_ps: ns(c.post_ns),
            llc_ps: ns(cfg.llc.latency_ns),
            mtu: c.mtu_bytes,
            overhead: c.packet_overhead_bytes,
            send_queue: c.send_queue as u32,
            rpb_entries: c.rpb_entries,
            pending: 0,
            latency_sum_ps: 0,
            server_sum_ps: 0,
            acks: 0,
        }
    }

    /// Regions posted and not yet durable.
    pub fn busy(&self) -> bool {
        self.pending > 0
    }

    fn client(&mut self, core: usize) -> usize {
        if self.client_of_core.len() <= core {
            self.client_of_core.resize(core + 1, None);
        }
        if let Some(i) = self.client_of_core[core] {
            return i as usize;
        }
        let i = self.clients.len();
        self.clients.push(Client {
            core,
            tx: Link::new(self.gbps),
            nic_tx: NicPipe::default(),
            nic_rx: NicPipe::default(),
            outstanding: 0,
            wait: Wait::None,
        });
        self.client_of_core[core] = Some(i as u16);
        i
    }

    /// Executes a client's `rdma_pwrite` or `rdma_wait` at the core's current time. Returns false
    /// when it cannot issue yet (the core is then blocked and retries when woken).
    pub fn execute(&mut self, m: &mut Machine, core: usize, ev: &Event) -> bool {
        let cl = self.client(core);
        let now = m.now;
        match ev.kind {
            Kind::RdmaPwrite => {
                let limit = if self.strategy == Strategy::Sync { 1 } else { self.send_queue };
                if self.clients[cl].outstanding >= limit {
                    self.clients[cl].wait = Wait::Slot;
                    m.block_core(core, StallCause::Rdma, now);
                    return false;
                }
                let posted = now + self.post_ps;
                m.cores[core].time = posted;
                m.cores[core].stats.instructions += 1;
                self.send(m, cl, ev, posted);
                if self.strategy == Strategy::Sync {
                    self.clients[cl].wait = Wait::All;
                    m.block_core(core, StallCause::Rdma, posted);
                }
                true
            }
            Kind::RdmaWait => {
                if self.clients[cl].outstanding > 0 {
                    self.clients[cl].wait = Wait::All;
                    m.block_core(core, StallCause::Rdma, now);
                }
                true
            }
            _ => true,
        }
    }

    /// Packetises a region and schedules each packet's landing in the server's LLC.
    fn send(&mut self, m: &mut Machine, cl: usize, ev: &Event, posted: u64) {
        let rid = self.regions.len() as u32;
        let first = ev.addr & !(LINE_BYTES - 1);
        let lines = (ev.addr + ev.data - first).div_ceil(LINE_BYTES) as u32;
        let channel = (cl % self.channels.len()) as u16;
        self.regions.push(Region {
            gid: ev.gid,
            client: cl as u16,
            channel,
            addr: ev.addr,
            len: ev.data,
            lines,
            bytes_arrived: 0,
            issued: 0,
            accepted: 0,
            posted_at: posted,
            arrived_at: 0,
            acked_at: u64::MAX,
            done: false,
        });
        self.pending += 1;
        self.clients[cl].outstanding += 1;
        // The client NIC fetches the work request and DMAs the payload (one message of its send
        // pipeline), then streams packets.
        let ready = self.clients[cl].nic_tx.start(posted, self.msg_ps) + self.nic_ps;
        let packets = ev.data.div_ceil(self.mtu);
        for k in 0..packets {
            let payload = self.mtu.min(ev.data - k * self.mtu);
            let wire = payload + self.overhead;
            let left_client = self.clients[cl].tx.send(ready, wire);
            // The server's port serves packets in the order they were posted (not strictly in
            // arrival order across clients): a simplification that keeps each client's packets
            // in order, as RDMA's reliable connections deliver them.
            let delivered = self.server_rx.forward(left_client + self.latency_ps, wire);
            // The server NIC writes the payload into the LLC (DDIO): one message of its receive
            // pipeline, shared by every client (taken in posting order, like the port).
            let in_llc = self.server_nic_rx.start(delivered, self.msg_ps) + self.nic_ps + self.llc_ps;
            m.schedule_design(in_llc, DesignEv { tag: TAG_PACKET, core: cl as u16, arg: (rid as u64) << 16 | k });
        }
    }

    pub fn on_event(&mut self, m: &mut Machine, design: &mut dyn Design, ev: DesignEv) {
        let queued = design.has_remote_queue();
        match ev.tag {
            TAG_PACKET => {
                let rid = (ev.arg >> 16) as usize;
                let k = ev.arg & 0xffff;
                let r = &mut self.regions[rid];
                let payload = self.mtu.min(r.len - k * self.mtu);
                if m.track_data {
                    // DDIO: the payload is now the newest copy of its words (what a design whose
                    // persistence domain includes the caches, eADR, keeps at a crash).
                    let (lo, hi) = (r.addr + k * self.mtu, r.addr + k * self.mtu + payload);
                    let mut w = lo & !7;
                    while w < hi {
                        let line = w & !(LINE_BYTES - 1);
                        m.coherent.line_mut(line).set(word_index(w), r.gid);
                        if let Some(log) = &mut m.coherent_written {
                            log.push(line);
                        }
                        w += 8;
                    }
                }
                r.bytes_arrived += payload;
                if k == 0 {
                    self.channels[r.channel as usize].queue.push_back(rid as u32);
                }
                if r.bytes_arrived >= r.len {
                    r.arrived_at = m.now;
                }
                let ch = r.channel as usize;
                self.pump(m, ch, queued);
            }
            TAG_TO_MC => {
                let rid = (ev.arg >> 16) as usize;
                let idx = ev.arg & 0xffff;
                if queued {
                    let ch = ev.core as usize;
                    self.channels[ch].at_mc.push_back((rid as u32, idx as u32));
                    self.offer_lines(m, design, ch);
                } else {
                    let d = self.regions[rid].line_data(idx);
                    to_memory(m, design, d, DesignEv { tag: TAG_WPQ_ACK, core: ev.core, arg: rid as u64 });
                }
            }
            TAG_ROOM => {
                let ch = ev.core as usize;
                self.offer_lines(m, design, ch);
            }
            TAG_WPQ_ACK => {
                let rid = ev.arg as usize;
                let ch = ev.core as usize;
                self.channels[ch].in_flight -= 1;
                let r = &mut self.regions[rid];
                r.accepted += 1;
                if r.accepted == r.lines {
                    r.done = true;
                    self.server_sum_ps += m.now - r.arrived_at;
                    let (client, addr) = (r.client, r.addr);
                    m.note("rdma_persist", client as usize, addr);
                    // The MC's signal reached the NIC (the reply's hop); the NIC sends the ACK.
                    let acking = self.server_nic_tx.start(m.now, self.msg_ps);
                    let left = self.server_tx.send(acking + self.nic_ps, self.overhead);
                    let cl = &mut self.clients[client as usize];
                    let at = cl.nic_rx.start(left + self.latency_ps, self.msg_ps) + self.nic_ps;
                    m.schedule_design(at, DesignEv { tag: TAG_PERSIST_ACK, core: client, arg: rid as u64 });
                    let regions = &self.regions;
                    self.channels[ch].queue.retain(|&q| !regions[q as usize].done);
                }
                self.pump(m, ch, queued);
            }
            TAG_PERSIST_ACK => {
                self.regions[ev.arg as usize].acked_at = m.now;
                let r = self.regions[ev.arg as usize];
                self.pending -= 1;
                self.acks += 1;
                self.latency_sum_ps += m.now - r.posted_at;
                let c = &mut self.clients[ev.core as usize];
                c.outstanding -= 1;
                let wake = match c.wait {
                    Wait::None => false,
                    Wait::Slot => true,
                    Wait::All => c.outstanding == 0,
                };
                if wake {
                    c.wait = Wait::None;
                    let core = c.core;
                    m.wake_core(core);
                }
            }
            _ => {}
        }
    }

    /// Hands the lines that reached the MC side to the design's remote BROI entry of `ch`, in
    /// the order they were sent, until it refuses one (it then sends `TAG_ROOM`). The first
    /// line of a region opens a new barrier region there: the entry's barrier index register
    /// keeps the region behind the previous one, whose lines may still be queued or in a bank.
    fn offer_lines(&mut self, m: &mut Machine, design: &mut dyn Design, ch: usize) {
        while let Some(&(rid, idx)) = self.channels[ch].at_mc.front() {
            let d = self.regions[rid as usize].line_data(idx as u64);
            let done = DesignEv { tag: TAG_WPQ_ACK, core: ch as u16, arg: rid as u64 };
            let room = DesignEv { tag: TAG_ROOM, core: ch as u16, arg: 0 };
            match design.submit_remote(m, ch, d, idx == 0, done, room) {
                RemoteSubmit::Taken => {}
                RemoteSubmit::Full => return,
                RemoteSubmit::Direct => to_memory(m, design, d, done),
            }
            self.channels[ch].at_mc.pop_front();
        }
    }

    /// Moves lines from the LLC toward the MCs while the channel's persist buffer has room. In
    /// order. Without a remote BROI queue in the design only the oldest region of the channel
    /// drains, so a region's first line reaches a WPQ only after every line of the previous one
    /// was accepted; with one (`queued`), the remote persist buffer only marks the region
    /// boundaries and the BROI entry enforces them, so the next region's lines follow as soon
    /// as the previous region's have all been sent.
    fn pump(&mut self, m: &mut Machine, ch: usize, queued: bool) {
        let wb = m.writeback_ps;
        let n = self.channels[ch].queue.len();
        let newest_first = self.strategy == Strategy::BrokenUnordered;
        for j in 0..n {
            if j > 0 && !newest_first && !queued {
                break;
            }
            let qi = if newest_first { n - 1 - j } else { j };
            let rid = self.channels[ch].queue[qi] as usize;
            loop {
                if self.channels[ch].in_flight >= self.rpb_entries {
                    return;
                }
                let r = &mut self.regions[rid];
                if r.issued >= r.ready_lines() {
                    if queued && !newest_first && r.issued < r.lines {
                        // Its remaining bytes are still on the wire: later regions wait.
                        return;
                    }
                    break;
                }
                let idx = r.issued;
                r.issued += 1;
                self.channels[ch].in_flight += 1;
                m.schedule_design(
                    m.now + wb,
                    DesignEv { tag: TAG_TO_MC, core: ch as u16, arg: (rid as u64) << 16 | idx as u64 },
                );
            }
        }
    }

    /// (region gid, when its persist ACK reached the client) for every acknowledged region: what
    /// the crash checker may require to be durable.
    pub fn acked_regions(&self) -> Vec<(u64, u64)> {
        self.regions.iter().filter(|r| r.acked_at != u64::MAX).map(|r| (r.gid, r.acked_at)).collect()
    }

    pub fn report(&self) -> NetReport {
        let lines_issued = self.regions.iter().map(|r| r.issued as u64).sum();
        let lat = if self.acks > 0 { self.latency_sum_ps as f64 / self.acks as f64 / 1000.0 } else { 0.0 };
        let server = if self.acks > 0 { self.server_sum_ps as f64 / self.acks as f64 / 1000.0 } else { 0.0 };
        let tx: Vec<&Link> = self.clients.iter().map(|c| &c.tx).collect();
        NetReport {
            strategy: STRATEGIES
                .iter()
                .find(|(_, s)| *s == self.strategy)
                .map(|(n, _)| n.to_string())
                .unwrap_or_default(),
            clients: self.clients.len() as u64,
            regions: self.regions.len() as u64,
            region_bytes: self.regions.iter().map(|r| r.len).sum(),
            packets: tx.iter().map(|l| l.packets).sum::<u64>(),
            wire_bytes: tx.iter().map(|l| l.bytes).sum::<u64>() + self.server_tx.bytes,
            persist_acks: self.acks,
            // Rounded like every fractional run statistic (docs/stats.md).
            region_latency_avg_ns: crate::stats::round3(lat),
            server_persist_avg_ns: crate::stats::round3(server),
            round_trip_share: if lat > 0.0 { crate::stats::round3(1.0 - server / lat) } else { 0.0 },
            rpb_lines_issued: lines_issued,
        }
    }
}
