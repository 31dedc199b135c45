//! One direction of a network port: a serialiser that sends one packet at a time at the link's
//! bandwidth. Packets queue behind each other (FIFO), which is where bandwidth and contention
//! between clients sharing the server's port come from.

/// A link direction with its own clock: when it is free again.
#[derive(Clone, Debug)]
pub struct Link {
    /// Picoseconds per byte ×1000 (fixed point, so runs are host-independent).
    ps_per_byte_milli: u64,
    free_at: u64,
    pub bytes: u64,
    pub packets: u64,
}

impl Link {
    pub fn new(gbps: f64) -> Link {
        // 8 bits per byte at `gbps` Gb/s = 8000 / gbps ps per byte.
        Link { ps_per_byte_milli: (8_000_000.0 / gbps).round() as u64, free_at: 0, bytes: 0, packets: 0 }
    }

    /// Time to put `bytes` on the wire.
    pub fn serialise_ps(&self, bytes: u64) -> u64 {
        (bytes * self.ps_per_byte_milli).div_ceil(1000)
    }

    /// Sends a packet whose first byte is available at `at`; returns when its last byte has left.
    pub fn send(&mut self, at: u64, bytes: u64) -> u64 {
        let start = at.max(self.free_at);
        self.free_at = start + self.serialise_ps(bytes);
        self.bytes += bytes;
        self.packets += 1;
        self.free_at
    }

    /// Forwards a packet cut-through (the switch port toward the server): its tail arrives from
    /// upstream at `tail_at`; it cannot finish before that nor before the port has serialised it
    /// behind the packets already queued. Returns when its last byte has been delivered.
    pub fn forward(&mut self, tail_at: u64, bytes: u64) -> u64 {
        let done = tail_at.max(self.free_at + self.serialise_ps(bytes));
        self.free_at = done;
        self.bytes += bytes;
        self.packets += 1;
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_at_the_configured_rate_and_queues() {
        let mut l = Link::new(40.0);
        // 40 Gb/s = 5 bytes per ns: 4096 bytes take 819.2 ns.
        assert_eq!(l.serialise_ps(4096), 819_200);
        assert_eq!(l.send(0, 4096), 819_200);
        // A second packet offered at time 0 waits for the first.
        assert_eq!(l.send(0, 4096), 1_638_400);
        // One offered after the link went idle starts at once.
        assert_eq!(l.send(2_000_000, 5), 2_001_000);
    }

    #[test]
    fn forwarding_never_finishes_before_the_tail_arrives() {
        let mut l = Link::new(100.0);
        // 1000 bytes at 100 Gb/s take 80 ns; an idle port delivers the tail as it arrives.
        assert_eq!(l.forward(100_000, 1000), 100_000);
        // Back to back behind it: limited by the port's own serialisation.
        assert_eq!(l.forward(100_000, 1000), 180_000);
    }
}
