//! Reusing the application's recovery verdict from one crash instant to the next.
//!
//! A workload's recovery is a deterministic function of the words of the image it reads and of
//! the answers of `dfence_done`. The crash driver visits instants in time order, so the set of
//! completed dfences only grows: the same number of completed dfences means the same answers.
//! [`RecoveryMemo`] records the words the last recovery run read (the image's read tracking,
//! [`pmsim_trace::ReadLog`]) and runs the recovery again only when a word it read changed or a
//! dfence completed; otherwise its verdict is, exactly, the one a new run would give.
//!
//! It also answers `dfence_done` from a bitset indexed by gid, advanced as time goes on, instead
//! of a hash map per query (a recovery asks once per logged operation).

use pmsim_trace::{MemImage, ReadLog};
use pmsim_workloads::Recovery;
use rustc_hash::FxHashMap;

/// One recovery verdict: `Err` carries the recovery's message.
pub type Outcome = Result<(), String>;

pub struct RecoveryMemo {
    /// (completion time, gid) of every dfence, by completion time.
    dfences: Vec<(u64, u64)>,
    /// How many of `dfences` had completed at the current instant.
    completed: usize,
    /// Bit `gid` set: that dfence completed at or before the current instant.
    done: Vec<u64>,
    /// Words the last run read (`None`: it looked at the whole image).
    read: Option<ReadSet>,
    /// The last run's verdict and how many dfences had completed then.
    last: Option<(usize, Outcome)>,
    /// A word the last run read changed since.
    stale: bool,
    /// The last run's reads (kept for its memory).
    log: ReadLog,
    /// Recovery runs actually made (the rest were reused).
    pub runs: u64,
}

impl RecoveryMemo {
    /// `dfences`: (gid, completion time) of every dfence of the run.
    pub fn new(dfences: &[(u64, u64)]) -> RecoveryMemo {
        let mut by_time: Vec<(u64, u64)> = dfences.iter().map(|&(gid, ct)| (ct, gid)).collect();
        by_time.sort_unstable();
        let words = dfences.iter().map(|&(gid, _)| gid / 64 + 1).max().unwrap_or(0);
        RecoveryMemo {
            dfences: by_time,
            completed: 0,
            done: vec![0; words as usize],
            read: None,
            last: None,
            stale: true,
            log: ReadLog::default(),
            runs: 0,
        }
    }

    /// Moves to instant `t` (never earlier than the last one).
    fn advance(&mut self, t: u64) {
        while let Some(&(ct, gid)) = self.dfences.get(self.completed) {
            if ct > t {
                break;
            }
            self.done[(gid / 64) as usize] |= 1 << (gid % 64);
            self.completed += 1;
        }
    }

    /// The image changed at `word` since the last call of [`RecoveryMemo::verdict`].
    pub fn changed(&mut self, word: u64) {
        if !self.stale {
            self.stale = self.read.as_ref().is_none_or(|r| r.contains(word));
        }
    }

    /// The recovery's verdict on `img` at instant `t` (non-decreasing from call to call).
    pub fn verdict(&mut self, r: &dyn Recovery, img: &mut MemImage, t: u64) -> Outcome {
        self.advance(t);
        match &self.last {
            Some((n, res)) if *n == self.completed && !self.stale => return res.clone(),
            _ => {}
        }
        img.track_reads(std::mem::take(&mut self.log));
        let done = &self.done;
        let dfence_done = |gid: u64| done.get((gid / 64) as usize).is_some_and(|w| w >> (gid % 64) & 1 == 1);
        let res: Outcome = r.check(img, &dfence_done).map(|_| ()).map_err(|e| e.to_string());
        self.log = img.take_reads().unwrap_or_default();
        let log = &self.log;
        self.read = if log.all {
            None
        } else {
            let mut set = self.read.take().unwrap_or_default();
            set.reset(&log.words);
            Some(set)
        };
        self.runs += 1;
        self.stale = false;
        self.last = Some((self.completed, res.clone()));
        res
    }
}

/// A set of word addresses as stamps in 4 KiB pages: filling it from a run's reads (tens of
/// thousands, mostly clustered) costs an array store each, not a hash insertion.
#[derive(Default)]
struct ReadSet {
    page_of: FxHashMap<u64, u32>,
    pages: Vec<[u32; 512]>,
    /// Words stamped with this are in the set.
    stamp: u32,
}

impl ReadSet {
    /// Makes the set exactly `words`.
    fn reset(&mut self, words: &[u64]) {
        let ReadSet { page_of, pages, stamp } = self;
        if *stamp == u32::MAX {
            pages.iter_mut().for_each(|p| p.fill(0));
            *stamp = 0;
        }
        *stamp += 1;
        let (mut last, mut cur) = (u64::MAX, 0usize);
        for &w in words {
            let p = w >> 12;
            if p != last {
                last = p;
                cur = *page_of.entry(p).or_insert_with(|| {
                    pages.push([0; 512]);
                    (pages.len() - 1) as u32
                }) as usize;
            }
            pages[cur][((w >> 3) & 511) as usize] = *stamp;
        }
    }

    fn contains(&self, w: u64) -> bool {
        self.page_of.get(&(w >> 12)).is_some_and(|&i| self.pages[i as usize][((w >> 3) & 511) as usize] == self.stamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_set_holds_exactly_the_last_words() {
        let mut s = ReadSet::default();
        s.reset(&[0x1000, 0x1008, 0x5000, 0x1000, 0xffff_fff8]);
        for w in [0x1000, 0x1008, 0x5000, 0xffff_fff8] {
            assert!(s.contains(w), "{w:#x}");
        }
        for w in [0x1010, 0x0, 0x5008, 0x2000] {
            assert!(!s.contains(w), "{w:#x}");
        }
        s.reset(&[0x1010]);
        assert!(s.contains(0x1010) && !s.contains(0x1000) && !s.contains(0x5000));
        s.stamp = u32::MAX;
        s.reset(&[0x2000]);
        assert!(s.contains(0x2000) && !s.contains(0x1010));
    }
}
